"""The pod addresses the kubelet stand-in (kubelet.py) hands out: loopback addresses, 127.244.x.y.

Not a cluster's 10.244.x.y: the test bed's processes share this machine's network, and a probe (or anything else)
must reach a pod's process at its pod IP, which the process binds (the runtime tells it the address, as
``status.podIP``). On Linux the whole of 127.0.0.0/8 is local (the kernel's ``local 127.0.0.0/8 dev lo`` route),
so any process can bind and reach 127.244.x.y with no set-up, and each pod, having an address of its own, can
listen on the same port as every other, as pods can in their own network namespaces.

As the node IPAM controller gives each node a podCIDR and the CNI plugin's host-local IPAM hands out its
addresses, each kubelet stand-in claims a /24 of 127.244.0.0/16 for as long as it runs: the claim is an abstract
Unix socket named after the block, which is scoped to the network namespace and released when its process ends,
so the test beds of one machine (pytest's workers) never hand out the same address. An address is a pod's until
the pod is removed from the API server.
"""

from __future__ import annotations

import random
import socket

POD_NETWORK = "127.244"  # the pods' /16; loopback, see the module's docstring


class PodAddresses:
    """One node's pod addresses: /24 blocks of 127.244.0.0/16, each claimed for this process, and within them
    addresses handed out round-robin from a random start, as host-local IPAM hands them out after its last one
    (so that a kubelet started after another one's stop does not give the first new pod the address a lingering
    process of the old one may still hold). Not thread-safe: callers hold the kubelet's lock."""

    HOSTS = range(2, 255)  # .1 is a node's bridge in a pod CIDR; .0 and .255 are left alone

    def __init__(self) -> None:
        self._blocks: list[tuple[int, socket.socket]] = []
        self._in_use: set[str] = set()
        self._next = random.randrange(len(self.HOSTS))

    def allocate(self) -> str:
        while True:
            free = [f"{POD_NETWORK}.{block}.{host}" for block, _ in self._blocks for host in self.HOSTS]
            for offset in range(len(free)):
                address = free[(self._next + offset) % len(free)]
                if address not in self._in_use:
                    self._next = (self._next + offset + 1) % len(free)
                    self._in_use.add(address)
                    return address
            self._claim()

    def release(self, address: str) -> None:
        self._in_use.discard(address)

    def close(self) -> None:
        for _, claim in self._blocks:
            claim.close()
        self._blocks.clear()

    def _claim(self) -> None:
        owned = {block for block, _ in self._blocks}
        for block in range(256):
            if block in owned:
                continue
            claim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                claim.bind(f"\0actions-runners-simulator/pod-cidr/{POD_NETWORK}.{block}.0/24")
            except OSError:
                claim.close()
                continue
            self._blocks.append((block, claim))
            return
        raise RuntimeError(f"no pod addresses left: every /24 of {POD_NETWORK}.0.0/16 is claimed on this machine")
