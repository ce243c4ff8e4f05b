"""The listener image a RunnerScaleSet runs when it names none: this release's, by its tag and, in a released
package, by its digest too (a tag can be moved on a registry; a digest names one image for good).

The release workflow (.github/workflows/release.yml) builds the image (`make listener-image`) and writes its
digest into `DIGEST` here (tools/release/stamp-listener-digest.py) before it builds the wheel and the plugin
archives; its push checks the registry stored that very manifest: a package installed from PyPI runs the very
image its release pushed.
In a checkout `DIGEST` is empty and the default names the tag alone.
"""

from __future__ import annotations

from importlib.metadata import version

REPOSITORY = "ghcr.io/pulumi-actions-runners/listener"
DIGEST = ""  # "sha256:<64 hex>" in a released package; empty in a checkout


def default_listener_image() -> str:
    """``REPOSITORY:VERSION``, and ``@DIGEST`` once a release has stamped it."""
    tagged = f"{REPOSITORY}:{version('pulumi-actions-runners')}"
    return f"{tagged}@{DIGEST}" if DIGEST else tagged
