"""What is reviewed is what is applied: the pipeline's `pulumi up --plan` applies the plan of the preview it
reported, through the real CLI. A registration token's Diff reads the clock, so the token can fall due between
the preview and the update: the update then refuses to renew it (and rotate the fleet) unreviewed."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

from actions_runners_simulator.kube_apiserver import KubeApiServer
from actions_runners_simulator.workspace import PulumiWorkspace
from tests.conftest import ROOT, quick_simulator, wait_until
from tests.test_report import report

LIFETIME, REFRESH_BEFORE = 70, 40  # the token falls due 30 s after it was made: time enough for one preview
REMOVALS = r"/actions/runners/\d+$"


def test_an_update_applies_the_reviewed_plan_and_refuses_a_renewal_that_fell_due_since(
    kube_api_server: KubeApiServer, cli_dir: Path
) -> None:
    with (
        quick_simulator(kube_api_server, token_lifetime=LIFETIME) as sim,
        PulumiWorkspace(ROOT, cli_dir) as stack,
    ):
        config = sim.stack_config(runners=2, grace_period_seconds=1, pool=True)
        stack.new_stack(
            config=config | {"tokenRefreshBeforeSeconds": str(REFRESH_BEFORE)}, secrets={"githubToken": sim.credential}
        )
        stack.run("up", "--yes")
        expires_at = json.loads(stack.run("stack", "output", "--json").stdout)["token_expires_at"]
        due = datetime.fromisoformat(expires_at).timestamp() - REFRESH_BEFORE
        plan = str(stack.root / "plan.json")

        preview = stack.run("preview", "--json", "--show-sames", "--save-plan", plan).stdout
        assert time.time() < due, "the preview took longer than the token's time to fall due"
        reviewed = json.loads(report("-", "--format", "json", stdin=preview).stdout)
        assert reviewed["changes"] is False
        [notice] = reviewed["notices"]
        assert notice.startswith("registration token registration falls due for renewal at ")
        assert "renews it and rotates the 2 runners registered with it, whatever this preview says" in notice

        wait_until(lambda: time.time() > due + 1, "the registration token to fall due", timeout=LIFETIME)
        registered = sorted(r["id"] for r in sim.github.runners())
        removals = len(sim.github.calls("DELETE", REMOVALS))
        refused = stack.run("up", "--yes", "--skip-preview", "--plan", plan, check=False)
        assert refused.returncode != 0
        assert "create-replacement is not allowed by the plan: this resource is constrained to same" in refused.stdout
        assert len(sim.github.calls("DELETE", REMOVALS)) == removals  # no runner was touched
        assert sorted(r["id"] for r in sim.github.runners()) == registered

        # The next run reports what is due now, and applies exactly that.
        preview = stack.run("preview", "--json", "--save-plan", plan).stdout
        text = report("-", stdin=preview).stdout
        assert "Runners: 2 runners recreated, at most 1 out of service at once; 1 registration token renewed." in text
        stack.run("up", "--yes", "--skip-preview", "--plan", plan)
        assert not set(r["id"] for r in sim.github.runners()) & set(registered)
