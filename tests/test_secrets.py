"""No registration token or GitHub credential in plain text: not in state, the pickled provider, pod specs or logs."""

from __future__ import annotations

import base64
import json

from actions_runners_simulator.engine import PROVIDER_KEY, MiniEngine
from tests.conftest import ROOT
from tests.helpers import NAMESPACE, new_token, outputs, secret_token
from tests.programs import runner_with_token


def _everything_written(engine: MiniEngine, sim) -> dict[str, str]:
    provider_blobs = [base64.b64decode(r.inputs[PROVIDER_KEY]).decode("latin-1") for r in engine.state.values()]
    return {
        "state": json.dumps(engine.export()),
        "pickled provider": "\n".join(provider_blobs),
        "pod specs": json.dumps(sim.kube.pods(NAMESPACE)),
        "provider logs": "\n".join(engine.provider.stderr_lines),
    }


def test_tokens_and_credentials_never_appear_in_plain_text(sim, engine) -> None:
    engine.up()
    engine.config["tokenRefreshBeforeSeconds"] = "3000"
    engine.up()  # a rotation: replacement, deletion and creation all write and log
    token = secret_token(sim, outputs(engine, "runner-0")["secret_name"])

    written = _everything_written(engine, sim)

    assert engine.provider.stderr_lines, "the provider logged nothing: this test would prove nothing about logs"
    for where, text in written.items():
        assert token not in text, f"registration token in plain text in the {where}"
        assert sim.credential not in text, f"GitHub credential in plain text in the {where}"


def test_a_token_passed_as_a_plain_string_is_still_kept_secret(sim) -> None:
    token = new_token(sim)
    with MiniEngine(ROOT) as engine:
        engine.up(runner_with_token(sim, token))  # a plain str, not an Output.secret
        exported = json.dumps(engine.export())
        runner = next(iter(engine.state.values()))
    assert token not in exported
    assert {"registration_token", "github_token"} <= runner.secret_inputs


def test_the_provider_is_pickled_by_reference_under_its_stable_module_path(sim, engine) -> None:
    engine.up()
    blobs = {r.type.rsplit(":", 1)[-1]: base64.b64decode(r.inputs[PROVIDER_KEY]) for r in engine.state.values()}

    assert b"pulumi_actions_runners.providers.runner" in blobs["Runner"]
    assert b"RunnerProvider" in blobs["Runner"]
    assert b"pulumi_actions_runners.providers.registration_token" in blobs["RegistrationToken"]
    # By reference, the pickle holds no code: a few hundred bytes, not the provider's functions.
    assert all(len(blob) < 1000 for blob in blobs.values()), {k: len(v) for k, v in blobs.items()}
