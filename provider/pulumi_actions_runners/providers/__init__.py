"""Pulumi dynamic providers. Pulumi pickles these classes by module path into every stack's state:
never rename or move these modules or classes, or existing stacks can no longer be updated or destroyed."""
