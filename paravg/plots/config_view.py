"""The configuration of one experiment, as YAML and as a small HTML page for the report.

Shows the experiment's own overrides first (what makes it differ from the others), then
the effective ``model`` / ``trainer`` / ``sync`` sections after merging over the top-level
config (``paravg.config.experiment_config``), and the schedule derived from them.
"""

from __future__ import annotations

import html
from pathlib import Path

import yaml

from paravg.io import write_text_atomic

_CSS = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
pre { background: #f6f6f6; border: 1px solid #ddd; padding: 0.8em; font-size: 0.9em; }
p { color: #555; max-width: 50em; }
"""


def _yaml(obj) -> str:
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=None, width=90)


def experiment_config_yaml(
    name: str, resolved: dict, overrides: dict | None, schedule: dict | None = None
) -> str:
    """YAML text: ``experiment``, ``overrides``, the effective sections, ``schedule``."""
    doc = {"experiment": name, "overrides": overrides or {}, **resolved}
    if schedule:
        doc["schedule"] = schedule
    return _yaml(doc)


def experiment_config_html(
    name: str, resolved: dict, overrides: dict | None, schedule: dict | None = None
) -> str:
    """A self-contained HTML page of the same content."""
    title = f"Configuration of experiment {name}"
    parts = [
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_CSS}</style></head><body><h1>{html.escape(title)}</h1>",
        "<h2>Overrides</h2><p>What <code>experiments: " + html.escape(name) + "</code> changes "
        "relative to the top-level config (empty: the defaults).</p>",
        f"<pre>{html.escape(_yaml(overrides or {}))}</pre>",
        "<h2>Effective settings</h2><p>The merged <code>model</code>, <code>trainer</code> and "
        "<code>sync</code> sections this experiment trained with.</p>",
        f"<pre>{html.escape(_yaml(resolved))}</pre>",
    ]
    if schedule:
        parts += [
            "<h2>Schedule</h2><p>Derived from the trainer settings and the egs "
            "(<code>paravg.schedule.Schedule</code>).</p>",
            f"<pre>{html.escape(_yaml(schedule))}</pre>",
        ]
    parts.append("</body></html>\n")
    return "".join(parts)


def write_experiment_config(
    name: str,
    resolved: dict,
    overrides: dict | None,
    yaml_out: str | Path,
    html_out: str | Path,
    schedule: dict | None = None,
) -> None:
    """Write both views atomically."""
    write_text_atomic(yaml_out, experiment_config_yaml(name, resolved, overrides, schedule))
    write_text_atomic(html_out, experiment_config_html(name, resolved, overrides, schedule))
