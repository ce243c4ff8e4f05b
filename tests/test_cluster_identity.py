"""Which cluster a kubeconfig names, as plain code: the CA decides where both sides name one, else the address;
what the kubeconfig alone calls another cluster is confirmed by a look for the resource's own pods before a call
is refused."""

from __future__ import annotations

import pytest

from pulumi_actions_runners.inputs.cluster import OtherCluster, other_cluster, verified_cluster

A_CA, B_CA = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"


@pytest.mark.parametrize(
    ("recorded", "reached", "other"),
    [
        (f"https://10.0.0.1:6443 (CA sha256:{A_CA})", f"https://lb.example:443 (CA sha256:{A_CA})", False),
        # k3s's default address, a tunnel, a DNS name moved: the same address, another cluster.
        (f"https://127.0.0.1:6443 (CA sha256:{A_CA})", f"https://127.0.0.1:6443 (CA sha256:{B_CA})", True),
        (f"https://10.0.0.1:6443 (CA sha256:{A_CA})", f"https://10.0.0.2:6443 (CA sha256:{B_CA})", True),
        ("https://10.0.0.1:6443", f"https://10.0.0.1:6443 (CA sha256:{B_CA})", False),  # a CA on one side only
        ("https://10.0.0.1:6443", "https://10.0.0.2:6443", True),
        (None, f"https://10.0.0.2:6443 (CA sha256:{B_CA})", False),  # a state from before: no verdict
        (f"https://10.0.0.1:6443 (CA sha256:{A_CA})", None, False),  # no kubeconfig here (a preview): none either
    ],
)
def test_the_ca_decides_where_both_name_one_else_the_address(recorded, reached, other) -> None:
    assert other_cluster(recorded, reached) is other


def test_another_cluster_by_the_kubeconfig_is_confirmed_by_a_look_for_our_pods_before_a_refusal(tmp_path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://10.9.9.9:6443'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\n"
    )
    recorded = "https://10.0.0.1:6443"
    looks: list[bool] = []

    def ours_there(found: bool):
        def look() -> bool:
            looks.append(found)
            return found

        return look

    # A renewed address of the same cluster: its pods are there, so the call goes on and records the new identity.
    assert verified_cluster("pool p", "update", recorded, str(kubeconfig), ours_there(True)) == "https://10.9.9.9:6443"
    with pytest.raises(OtherCluster, match=r"pool p is in the Kubernetes cluster https://10\.0\.0\.1:6443"):
        verified_cluster("pool p", "update", recorded, str(kubeconfig), ours_there(False))
    assert looks == [True, False]
    # The same cluster by the kubeconfig: no look at all.
    assert verified_cluster("pool p", "refresh", "https://10.9.9.9:6443", str(kubeconfig), ours_there(True))
    assert looks == [True, False]
