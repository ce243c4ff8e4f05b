"""What a front door converts its property dict into, once: Check's rules, the typed inputs of a call (RunnerInputs,
Endpoint), default names and ownership ids."""
