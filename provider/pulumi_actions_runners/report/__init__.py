"""A review-ready report of what a `pulumi preview --json` does to the runners (see __main__ for the command).

from pulumi_actions_runners.report import build_report, render
report = build_report(preview_json)       # the parsed output, or its text
print(render.markdown(report), report.to_json()["totals"])
"""

from . import render
from .live import LiveLookFailed, look_live
from .plan import PreviewUnreadable, ResourceChange
from .summary import Report, build_report

__all__ = ["LiveLookFailed", "PreviewUnreadable", "Report", "ResourceChange", "build_report", "look_live", "render"]
