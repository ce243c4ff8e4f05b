"""``pulumi-resource-actions-runners``: the engine starts it with its own address and reads the port it serves on
from the first line of stdout."""

from __future__ import annotations

import sys

from .progress import log_to_engine
from .server import serve


def main() -> None:
    engine = next((arg for arg in sys.argv[1:] if not arg.startswith("-")), None)
    if engine:
        log_to_engine(engine)
    server, port = serve()
    sys.stdout.write(f"{port}\n")  # the engine reads the port from the first line
    sys.stdout.flush()
    try:
        server.wait_for_termination()
    except KeyboardInterrupt:  # how the engine stops its plugins once it is done with them
        server.stop(grace=None)


if __name__ == "__main__":
    main()
