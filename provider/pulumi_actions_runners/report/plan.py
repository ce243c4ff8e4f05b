"""What a `pulumi preview --json` means for the runners: per resource of ours, what happens and why, in words.

It reads the preview's steps (old state, new inputs, the engine's replace reasons) and judges them by the
provider's own rules (`input_differs`, the fields that recreate a runner), so that the report and the provider
cannot disagree on what changes. Nothing here calls GitHub or Kubernetes; secrets stay the ``[secret]`` the
preview holds them as, and no value of a secret input is ever read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pulumi.output import Unknown
from pulumi.runtime.rpc import UNKNOWN

from ..github.releases import RunnerRelease, deadline_of, version_of_image
from ..inputs.runner import SETTINGS, SPEC_FIELDS, input_differs, runner_spec, stored
from ..inputs.runner_version import effective_image
from ..kube.pod_state import ENDED_PHASES
from ..lifecycle.pool import PoolRunner, PoolSpec, max_unavailable_count, runner_index
from ..plugin.properties import PACKAGE, core_names
from ..unknowns import holds_unknown
from ..wording import counted
from .phrase import Phrase, Value, joined
from .scale_set_plan import scale_set_change

TYPE_PREFIX = "pulumi-python:dynamic/actions-runners:"
PLUGIN_TYPE_PREFIX = f"{PACKAGE}:index:"  # the provider plugin's resources
RUNNER, POOL, TOKEN = "Runner", "RunnerPool", "RegistrationToken"
SCALE_SET = "RunnerScaleSet"
# --show-replacement-steps adds a replacement's halves beside its "replace" step: counted once, by the latter.
_IGNORED_OPS = (
    "same",
    "read",
    "refresh",
    "create-replacement",
    "delete-replaced",
    "import-replacement",
    "discard",
    "remove-pending-replace",
)
SECRET = "[secret]"  # how the preview holds a secret's value
# An update or replacement whose changed input the preview does not show: a secret one (github_token, an App's key)
HIDDEN_CHANGE = "an input the preview hides as a secret changed (github_token, say)"


class PreviewUnreadable(Exception):
    """Not the output of `pulumi preview --json`, or a preview that failed."""


@dataclass
class GitHubWrites:
    """The writes a change makes to GitHub, by kind: what GitHub's secondary limits count."""

    removals: int = 0  # DELETE .../actions/runners/{id} (RemoveRunner)
    jit_configs: int = 0  # POST .../generate-jitconfig
    tokens: int = 0  # POST .../registration-token
    relabels: int = 0  # PUT .../actions/runners/{id}/labels

    def __add__(self, other: GitHubWrites) -> GitHubWrites:
        return GitHubWrites(*(a + b for a, b in zip(self.as_tuple(), other.as_tuple(), strict=True)))

    def as_tuple(self) -> tuple[int, int, int, int]:
        return (self.removals, self.jit_configs, self.tokens, self.relabels)

    @property
    def content_creating(self) -> int:
        """POST and PUT: 80 a minute and 500 an hour."""
        return self.jit_configs + self.tokens + self.relabels


@dataclass
class ResourceChange:
    kind: str  # Runner, RunnerPool, RunnerScaleSet or RegistrationToken
    name: str  # the resource's name in the program
    action: str  # create, recreate, rotate, scale, relabel, restart, update, renew, delete
    what: str  # the action in words, with counts: "rotate 3 of 3 runners, 1 at a time"
    reasons: list[str]  # why, in words
    github_url: str | None  # the scope it registers in once changed (the new inputs', when known)
    deployed_github_url: str | None = None  # where its runners are registered now (the old state's)
    runners_before: int = 0
    runners_after: int = 0
    recreated: int = 0  # taken down and made again (rotated, replaced)
    added: int = 0
    removed: int = 0
    relabelled: int = 0
    restarted: int = 0  # had ended (nothing in service to protect), started again
    out_of_service_at_most: int = 0  # of the runners in service now, at once during the change
    at_risk: list[str] = field(default_factory=list)  # registration names of runners the change takes down
    writes: GitHubWrites = field(default_factory=GitHubWrites)
    busy: list[str] | None = None  # filled by a live look: those of ``at_risk`` that run a job now
    uncertain: bool = False  # ``recreated`` is the worst that can happen: a hidden input cannot be compared


def read_steps(preview: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The steps of a preview, or PreviewUnreadable saying why there are none to judge."""
    if not isinstance(preview, Mapping) or ("steps" not in preview and "diagnostics" not in preview):
        raise PreviewUnreadable("this is not the output of `pulumi preview --json` (it has no steps)")
    errors = [d.get("message", "").strip() for d in preview.get("diagnostics") or () if d.get("severity") == "error"]
    if errors:
        raise PreviewUnreadable("the preview failed: " + " | ".join(e for e in errors if e)[:2000])
    return list(preview.get("steps") or ())


def plan_changes(preview: Mapping[str, Any]) -> list[ResourceChange]:
    """Every change the preview makes to a resource of ours, in the preview's order."""
    changes = []
    for step in read_steps(preview):
        kind = our_kind(step)
        if kind is None or step.get("op") in _IGNORED_OPS:
            continue
        old, new = step_state(step, "oldState"), step_state(step, "newState")
        op = "create" if step["op"] == "import" else step["op"]
        judge = {RUNNER: _runner_change, POOL: _pool_change, TOKEN: _token_change, SCALE_SET: _scale_set_change}[kind]
        reasons = list(core_names(dict.fromkeys(step.get("replaceReasons") or [])))  # the plugin's are camelCase
        changes.append(judge(op, resource_name(step["urn"]), old, new, reasons))
    return sorted(changes, key=_reading_order)


def _reading_order(change: ResourceChange) -> tuple[int, str, int]:
    """Tokens, pools, then runners; runner-2 before runner-10."""
    stem, _, index = change.name.rpartition("-")
    natural = (stem, int(index)) if index.isdigit() else (change.name, -1)
    return ((TOKEN, SCALE_SET, POOL, RUNNER).index(change.kind), *natural)


def our_kind(step: Mapping[str, Any]) -> str | None:
    urn = step.get("urn", "")
    kind = urn.rsplit("::", 2)[-2] if urn.count("::") >= 2 else ""
    kind = kind.rsplit("$", 1)[-1]  # a child's type comes after its parents'
    for prefix in (TYPE_PREFIX, PLUGIN_TYPE_PREFIX):
        if kind.startswith(prefix):
            return kind.removeprefix(prefix)
    return None


def resource_name(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def step_state(step: Mapping[str, Any], key: str) -> dict[str, Any]:
    """A state's properties (its outputs, else its inputs), with the preview's unknowns made Pulumi's own."""
    state = step.get(key) or {}
    props = state.get("outputs") or state.get("inputs") or {}
    if key == "newState":
        props = state.get("inputs") or props  # what the program asks for now
    if PLUGIN_TYPE_PREFIX in step.get("urn", ""):
        props = core_names(props)  # the provider plugin's, named as its schema names them
    return _with_unknowns(props)


def _with_unknowns(value: Any) -> Any:
    if value == UNKNOWN:
        return Unknown()
    if isinstance(value, dict):
        return {k: _with_unknowns(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_with_unknowns(v) for v in value]
    return value


# -- a lone Runner ------------------------------------------------------------------------------------------


def _runner_change(op: str, name: str, old: dict, new: dict, replace_reasons: list[str]) -> ResourceChange:
    url = _known(new.get("github_url")) or old.get("github_url")
    jit = stored(new if op != "delete" else old, "jit_config") is True
    registration = old.get("runner_name")
    change = ResourceChange(RUNNER, name, op, op, [], url, old.get("github_url"))
    if op == "create":
        change.what, change.runners_after, change.added = "create 1 runner", 1, 1
        change.writes.jit_configs = int(jit)
    elif op == "delete":
        change.what, change.runners_before, change.removed = "delete its runner", 1, 1
        change.writes.removals = 1
        change.at_risk = [registration] if registration else []
        change.out_of_service_at_most = 1
    elif op == "replace":
        change.runners_before = change.runners_after = 1
        change.reasons = [_why(key, old, new) for key in replace_reasons] or [HIDDEN_CHANGE]
        change.writes = GitHubWrites(removals=1, jit_configs=int(jit))
        if old.get("pod_phase") in ENDED_PHASES:  # nothing in service to take down
            change.action, change.what, change.restarted = "restart", "start its runner again", 1
            if set(replace_reasons) != {"pod_phase"}:
                change.action, change.what, change.restarted, change.recreated = "recreate", "recreate its runner", 0, 1
        else:
            change.action, change.what, change.recreated = "recreate", "recreate its runner", 1
            change.at_risk = [registration] if registration else []
            change.out_of_service_at_most = 1
    else:  # update
        change.runners_before = change.runners_after = 1
        if _holds_secret(stored(old, "labels")) or _holds_secret(new.get("labels")):  # the worst an update does
            change.action, change.what, change.relabelled = "relabel", "may relabel its runner in place", 1
            change.reasons = [_why("labels", old, new)]
            change.writes.relabels = 1
        elif input_differs(old, new, "labels"):
            change.action, change.what, change.relabelled = "relabel", "relabel its runner in place", 1
            change.reasons = [_why("labels", old, new)]
            change.writes.relabels = 1
        else:
            change.action, change.what = "update", "update settings; the runner is not touched"
        change.reasons += _settings_changed(old, new)
        change.reasons = change.reasons or [HIDDEN_CHANGE]
    return change


# -- a RunnerPool -------------------------------------------------------------------------------------------


def _pool_change(op: str, name: str, old: dict, new: dict, replace_reasons: list[str]) -> ResourceChange:
    url = _known(new.get("github_url")) or old.get("github_url")
    runners = list(old.get("runners") or [])
    before, after = len(runners), _known(new.get("replicas"))
    names = [r.get("name") for r in runners if r.get("name")]
    jit = stored(new if op != "delete" else old, "jit_config") is True
    change = ResourceChange(POOL, name, op, op, [], url, old.get("github_url"), runners_before=before)
    count = before if after is None else int(after)  # replicas not known yet: as many as now
    if op == "create":
        change.what, change.runners_after, change.added = f"create {runners_phrase(count)}", count, count
        if after is None:
            change.what = "create its runners (how many is known once the update runs)"
        change.writes.jit_configs = count if jit else 0
        return change
    if op == "delete":
        change.what, change.removed, change.at_risk = f"delete {runners_phrase(before)}", before, names
        change.writes.removals = before
        change.out_of_service_at_most = before
        return change
    if op == "replace":  # a new pool: the old one is taken down first, then the new one made
        change.action, change.runners_after = "recreate", count
        change.what = f"recreate the pool: its {runners_phrase(before)} taken down first, then {count} made"
        change.reasons = [_why(key, old, new) for key in replace_reasons]
        change.recreated, change.added, change.removed = (
            min(before, count),
            max(0, count - before),
            max(0, before - count),
        )
        change.at_risk, change.out_of_service_at_most = names, before
        change.writes = GitHubWrites(removals=before, jit_configs=count if jit else 0)
        return change
    if new.get("refill") is True or old.get("refill") is True:
        return _refill_update(change, old, new, runners, after)
    return _pool_update(change, old, new, runners, after, jit)


def _refill_update(change: ResourceChange, old: dict, new: dict, runners: list[dict], after: Any) -> ResourceChange:
    """As reconcile_refill_pool plans it: a new token goes into the Job's Secret (only runners not registered yet
    are recreated), more replicas raise the Job's parallelism, and anything else rolls to a new Job, its idle
    runners drained at most ``max_unavailable`` at a time, busy ones left to finish their jobs."""
    before = len(runners)
    replicas = before if after is None else int(after)
    max_unavailable = _max_unavailable(new.get("max_unavailable"), replicas)
    changed = [k for k in SPEC_FIELDS if input_differs(old, new, k)]
    token = input_differs(old, new, "token_hash")
    turning_on, turning_off = old.get("refill") is not True, new.get("refill") is not True
    seen = [p.removeprefix("seen by refresh: ") for p in old.get("problems") or () if p.startswith("seen by ")]
    parallelism = old.get("parallelism") or 0
    rolls = turning_on or turning_off or bool(changed) or replicas < parallelism or bool(seen) or not old.get("job")
    change.runners_after, change.added = replicas, max(0, replicas - before)
    change.removed = max(0, before - replicas)
    if turning_off:
        change.reasons = ["refill turned off: the pool makes its own runners again"]
        change.what = f"delete Job {old.get('job')} and drain its {runners_phrase(before)}; then make {replicas}"
    elif rolls:
        change.reasons = (
            (
                ["refill turned on: Kubernetes' Job controller refills a slot as soon as its runner's job ends"]
                if turning_on
                else []
            )
            + [_why(k, old, new) for k in changed]
            + (
                [f"replicas {parallelism} -> {replicas}: a new Job, so that no busy runner is chosen"]
                if replicas < parallelism and not turning_on
                else []
            )
            + [f"{problem} (seen by refresh)" for problem in seen]
        )
        change.what = (
            f"roll to a new Job of {runners_phrase(replicas)}: the {runners_phrase(before)} of "
            f"{old.get('job') or 'the pool'} drained, idle ones at most {max_unavailable} at a time, busy ones left to "
            "finish their jobs"
        )
    if turning_off or rolls:
        change.recreated = before
        change.at_risk = [r["name"] for r in runners if r.get("name")]
        change.out_of_service_at_most = min(before, max_unavailable)
        change.writes.removals = before
    else:
        unregistered = [r for r in runners if r.get("id") is None]
        parts = []
        if token:
            change.reasons.append(_why("token_hash", old, new))
            parts.append(
                f"write the new token to Job {old.get('job')}'s Secret: registered runners keep theirs; "
                f"{runners_phrase(len(unregistered))} not registered yet (seen by refresh) recreated"
            )
            change.recreated = len(unregistered)
            change.at_risk = [r["name"] for r in unregistered]
            change.writes.removals = len(unregistered)
        if replicas > parallelism:
            change.reasons.append(f"replicas {parallelism} -> {replicas}")
            parts.append(f"raise Job {old.get('job')}'s parallelism from {parallelism} to {replicas}")
        finished = old.get("finished_pods") or 0
        if finished >= max(replicas, 1):
            change.reasons.append(f"{finished} finished runner pods (seen by refresh)")
            parts.append(f"delete {finished} finished runner pods")
        change.reasons += _settings_changed(old, new, ("max_unavailable",))
        change.what = "; ".join(parts) or "update settings; no runner is touched"
        change.reasons = change.reasons or [HIDDEN_CHANGE]
    change.action = "rotate" if change.recreated else "scale" if replicas != parallelism else "update"
    return change


def _pool_update(
    change: ResourceChange, old: dict, new: dict, runners: list[dict], after: Any, jit: bool
) -> ResourceChange:
    """As reconcile_pool plans it: the surplus removed first (ended runners, then out-of-date ones, then the
    highest index), ended runners restarted, each other runner relabelled or rotated unless up to date."""
    before = len(runners)
    replicas = before if after is None else int(after)
    judge = _RunnerJudge(old, new)
    ended = [r for r in runners if r.get("pod_phase") in ENDED_PHASES]
    surplus = max(0, before - replicas)
    pool_name = str(old.get("pool_name") or "")
    order = sorted(runners, key=lambda r: (r not in ended, judge.up_to_date(r), -runner_index(pool_name, r["name"])))
    removed, kept = order[:surplus], [r for r in runners if r not in order[:surplus]]
    restarted = [r for r in kept if r in ended]
    relabelled = [r for r in kept if r not in ended and not judge.up_to_date(r) and judge.relabels(r)]
    rotated = [r for r in kept if r not in ended and not judge.up_to_date(r) and not judge.relabels(r)]
    removed_in_service = [r for r in removed if r not in ended]
    change.recreated, change.relabelled, change.restarted = len(rotated), len(relabelled), len(restarted)
    change.removed, change.added, change.runners_after = surplus, max(0, replicas - before), replicas
    max_unavailable = _max_unavailable(new.get("max_unavailable"), replicas)
    change.out_of_service_at_most = min(len(rotated), max_unavailable) + len(removed_in_service)
    changed = judge.changed_fields
    hidden_change = judge.hidden_change([r for r in kept if r not in ended])
    # out of date though no input changed: an update cut short
    stale = [r for r in rotated if not changed] if hidden_change is None else []
    change.reasons = (
        [_why(k, old, new) for k in changed]
        + ([hidden_change] if hidden_change else [])
        + ([f"replicas {before} -> {replicas}"] if replicas != before else [])
        + ([f"{runners_phrase(len(stale))} out of date: an earlier update did not finish"] if stale else [])
        + ([f"{runners_phrase(len(ended))} ended after their job (seen by refresh)"] if ended else [])
        + _settings_changed(old, new, ("max_unavailable",))
    ) or [HIDDEN_CHANGE]
    change.what = _pool_what(change, before, max_unavailable)
    if judge.uncertain and change.recreated:
        change.what, change.uncertain = "may " + change.what, True
    change.action = _pool_action(change)
    change.at_risk = [r["name"] for r in (*rotated, *removed_in_service) if r.get("name")]
    change.writes = GitHubWrites(
        removals=len(rotated) + len(removed) + len(restarted),
        jit_configs=len(rotated) + len(restarted) + change.added if jit else 0,
        relabels=len(relabelled),
    )
    return change


class _RunnerJudge:
    """Whether a pool's runner is up to date or can be relabelled, by the provider's own rules (PoolSpec): on the
    hashes its Check records in the new inputs (they see through secrets), else on the spec the new inputs make,
    else by which inputs differ. A spec input hidden as a secret that no hash judges may have changed: then the
    judge is ``uncertain``, and every runner in service counts as rotated, the worst that can happen."""

    def __init__(self, old: dict, new: dict) -> None:
        self._old = old
        self.hidden = [k for k in SPEC_FIELDS if _holds_secret(stored(old, k)) or _holds_secret(new.get(k))]
        self.changed_fields = [
            k for k in ("token_hash", *SPEC_FIELDS) if k not in self.hidden and input_differs(old, new, k)
        ]
        hashes = (new.get("token_hash"), new.get("spec_hash"), new.get("shape_hash"))
        recorded = all(isinstance(h, str) and h != SECRET for h in hashes[1:])
        # A token not known yet (being renewed) matches no runner's: all are out of date, as the provider finds.
        self._hashes = hashes if recorded and isinstance(hashes[0], str | Unknown) else None
        self._spec = None
        if (
            self._hashes is None
            and not self.hidden
            and not any(_hidden(new.get(k)) for k in (*SPEC_FIELDS, "pool_name"))
        ):
            try:
                self._spec = PoolSpec(new["pool_name"], runner_spec(new, "", pool=new["pool_name"]), 0, 1, None)
            except (KeyError, TypeError, ValueError):
                self._spec = None
        self.uncertain = bool(self.hidden) and self._hashes is None

    def up_to_date(self, runner: dict) -> bool:
        if self._hashes is not None:
            return (runner.get("token_hash"), runner.get("spec_hash")) == self._hashes[:2]
        if self._spec is not None:
            return self._spec.up_to_date(PoolRunner.of_output(runner))
        hashes = (runner.get("token_hash"), runner.get("spec_hash"))
        unchanged = not self.changed_fields and not self.uncertain
        return unchanged and hashes == (self._old.get("token_hash"), self._old.get("spec_hash"))

    def relabels(self, runner: dict) -> bool:
        if self._hashes is not None:
            return (runner.get("token_hash"), runner.get("shape_hash")) == (self._hashes[0], self._hashes[2])
        if self._spec is not None:
            return self._spec.relabels(PoolRunner.of_output(runner))
        return self.changed_fields == ["labels"] and not self.uncertain and bool(runner.get("shape_hash"))

    def hidden_change(self, runners: list[dict]) -> str | None:
        """Why runners change that no visible input explains: a hidden one changed, or may have."""
        names = joined(", ", map(Value, self.hidden))
        if self.uncertain:
            return Phrase(
                "a hidden input changed or cannot be compared (", names, ": the preview hides it as a secret)"
            )
        if not self.hidden or self._hashes is None:
            return None
        _, spec_hash, shape_hash = self._hashes
        changed = [r for r in runners if r.get("spec_hash") != spec_hash]
        visible = [k for k in self.changed_fields if k != "token_hash"]
        reshaped = any(r.get("shape_hash") != shape_hash for r in changed)
        explained = any(k != "labels" for k in visible) if reshaped else "labels" in visible
        if not changed or explained:
            return None
        return Phrase("a hidden input changed (", names, ": the preview hides it as a secret)")


def _pool_what(change: ResourceChange, before: int, max_unavailable: int) -> str:
    parts = []
    if change.recreated:
        parts.append(f"rotate {change.recreated} of {runners_phrase(before)}, at most {max_unavailable} at a time")
    if change.relabelled:
        parts.append(f"relabel {runners_phrase(change.relabelled)} in place")
    if change.added or change.removed:
        parts.append(f"scale from {before} to {change.runners_after}")
    if change.restarted:
        parts.append(f"restart {runners_phrase(change.restarted)} that ended")
    return "; ".join(parts) or "update settings; no runner is touched"


def _pool_action(change: ResourceChange) -> str:
    for count, action in (
        (change.recreated, "rotate"),
        (change.added or change.removed, "scale"),
        (change.relabelled, "relabel"),
        (change.restarted, "restart"),
    ):
        if count:
            return action
    return "update"


def _max_unavailable(value: Any, replicas: int) -> int:
    """As the provider counts it; 25% (RunnerPool's default) while not known."""
    return max_unavailable_count(_known(value) or "25%", replicas)


# -- a RunnerScaleSet ---------------------------------------------------------------------------------------


def _scale_set_change(op: str, name: str, old: dict, new: dict, replace_reasons: list[str]) -> ResourceChange:
    url = _known(new.get("github_url")) or old.get("github_url")
    change = ResourceChange(SCALE_SET, name, op, op, [], url, old.get("github_url"))
    if op == "replace":
        change.reasons = [_why(key, old, new) for key in replace_reasons]
    return scale_set_change(change, op, old, new, _why)


# -- a RegistrationToken ------------------------------------------------------------------------------------


def _token_change(op: str, name: str, old: dict, new: dict, replace_reasons: list[str]) -> ResourceChange:
    url = _known(new.get("github_url")) or old.get("github_url")
    change = ResourceChange(TOKEN, name, op, op, [], url, old.get("github_url"))
    if op == "create":
        change.what = "create a registration token"
        change.writes.tokens = 1
    elif op == "delete":
        change.what = "forget the registration token (GitHub lets it expire)"
    else:
        change.action, change.what = "renew", "renew the registration token"
        expires = old.get("expires_at")
        change.reasons = [
            _falls_due(expires, old, new) if key == "expires_at" and expires else _why(key, old, new)
            for key in replace_reasons
        ] or ["its inputs changed"]
        change.writes.tokens = 1
    return change


def _falls_due(expires: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> Phrase:
    """Why a token is renewed: it falls due. A changed refresh_before_seconds is said as the setting that made it
    due now, not as a cause of its own (the preview's `[diff: ~refresh_before_seconds]` names only what changed)."""
    before, now = old.get("refresh_before_seconds"), new.get("refresh_before_seconds")
    if before is not None and _known(now) is not None and before != now:
        return Phrase(
            "it expires at ",
            Value(expires),
            ", within refresh_before_seconds, now ",
            Value(str(now)),
            " (was ",
            Value(str(before)),
            ")",
        )
    return Phrase("it expires at ", Value(expires), ", within ", Value("refresh_before_seconds"))


# -- words --------------------------------------------------------------------------------------------------


def _why(key: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """Why a property's change matters, with its old and new value where they are worth reading."""
    before, after = stored(old, key), new.get(key)
    if key in ("token_hash", "registration_token", "registration_token_expires_at"):
        return "registration token renewed" if isinstance(after, Unknown) else "registration token changed"
    if _holds_secret(before) or _holds_secret(after):
        return Phrase(Value(key), " changed (the preview hides its value as a secret)")
    if key == "pod_phase":
        return Phrase("its pod is ", Value(str(old.get("pod_phase")).lower()), " (seen by refresh)")
    if key == "pod_template":
        return "pod template changed"
    if key == "image":
        return _image_why(old, new)
    if key == "labels":
        return Phrase("labels ", _labels(before), " -> ", _labels(after))
    if key == "runner_group":
        return Phrase("runner group ", _value(before, "Default"), " -> ", _value(after, "Default"))
    if key in ("docker", "jit_config", "ephemeral"):
        word = {"docker": "Docker", "jit_config": "just-in-time configs", "ephemeral": "ephemeral runners"}[key]
        return (
            f"{word} turned {'on' if after else 'off'}" if not isinstance(after, Unknown) else f"{word}: not known yet"
        )
    return Phrase(Value(key), " ", _value(before), " -> ", _value(after))


def _image_why(old: Mapping[str, Any], new: Mapping[str, Any]) -> Phrase:
    """A tracked runner's new release, with the day the old one stops getting jobs; else the images."""
    release = new.get("runner_release")
    was = stored(old, "runner_version") or version_of_image(str(old.get("image") or ""))
    now = new.get("runner_version")
    if isinstance(release, Mapping) and release.get("tracking") and release.get("newest") == now and was != now:
        published = str(release.get("newest_published_at") or "")[:10]
        deadline = (release.get("deadlines") or {}).get(was) or _deadline_by_schedule(was, release.get("releases"))
        until = (
            Phrase(f" {'stopped' if _passed(deadline) else 'stops'} receiving jobs after {deadline[:10]}")
            if isinstance(deadline, str)
            else Phrase(" is behind it")
        )
        return Phrase("actions/runner ", Value(now), f" was released on {published}; ", Value(was or "?"), until)
    return Phrase(Value("image"), " ", _value(effective_image(old)), " -> ", _value(effective_image(new)))


def _deadline_by_schedule(version: str | None, schedule: Any) -> str | None:
    """The replaced version's last day of jobs, from the releases Check recorded (see runner_version._facts)."""
    if not version or not isinstance(schedule, list):
        return None
    try:
        listed = tuple(RunnerRelease(str(v), str(at)) for v, at in schedule)
        deadline = deadline_of(version, listed)
    except (TypeError, ValueError):
        return None
    return deadline.strftime("%Y-%m-%dT%H:%M:%SZ") if deadline else None


def _passed(moment: str | None) -> bool:
    return isinstance(moment, str) and datetime.fromisoformat(moment.replace("Z", "+00:00")) <= datetime.now(UTC)


def _settings_changed(old: Mapping[str, Any], new: Mapping[str, Any], extra: tuple[str, ...] = ()) -> list[str]:
    keys = [k for k in (*extra, *SETTINGS) if k in new and input_differs(old, new, k)]
    return [
        f"{k} changed" if _holds_secret(old.get(k)) or _holds_secret(new.get(k)) else _why(k, old, new) for k in keys
    ]


def _value(value: Any, none: str = "(none)") -> str:
    if isinstance(value, Unknown) or holds_unknown(value):
        return "(known after the token or another resource is made)"
    return none if value is None or value == "" else Value(value)


def _labels(value: Any) -> str:
    if not isinstance(value, list) or holds_unknown(value):
        return _value(value)
    return joined(", ", map(Value, map(str, value))) if value else "(none)"


def _hidden(value: Any) -> bool:
    """Not to be judged: not known yet, or hidden as a secret."""
    return holds_unknown(value) or _holds_secret(value)


def _holds_secret(value: Any) -> bool:
    """The preview hides it, or a part of it (a pod template's containers, say), as a secret."""
    if isinstance(value, dict):
        return any(map(_holds_secret, value.values()))
    if isinstance(value, list):
        return any(map(_holds_secret, value))
    return value == SECRET


def _known(value: Any) -> Any:
    return None if _hidden(value) else value


def runners_phrase(count: int) -> str:
    """ "1 runner", "3 runners"."""
    return counted(count, "runner")
