"""``--trainer.dropout-schedule`` (``steps/libs/nnet3/train/dropout_schedule.py``).

A schedule is a piecewise-linear function of the data fraction x ∈ [0, 1], written as
comma-separated values: the first is at x = 0, the last at x = 1, and an interior value
may carry its position as ``value@x``; an interior value without ``@x`` sits at x = 0.5
(Kaldi's code; its help text says otherwise). Example, Kaldi's TDNN-F recipes:
``0,0@0.20,0.5@0.50,0`` = the points (0, 0), (0.2, 0), (0.5, 0.5), (1, 0). The x must not
decrease and the values lie in [0, 1).

Iteration t uses p(x_t) for its whole length, x_t = archives processed before t /
archives to process (clamped to ≤ 1), evaluated at the start of the iteration. paravg has
one pattern: every dropout component of the model (Kaldi's ``*``). Torch-free.
"""

from __future__ import annotations

from bisect import bisect_right

from paravg.errors import ConfigError


def parse_dropout_schedule(text: str) -> tuple[tuple[float, float], ...]:
    """The points (x, p) of a schedule string; a :class:`ConfigError` names what is wrong."""
    where = f"trainer.dropout_schedule {text!r}"
    items = [item.strip() for item in str(text).split(",")]
    if len(items) < 2 or "=" in str(text):
        raise ConfigError(
            f"{where}: expected comma-separated values (at least 2) such as "
            "'0,0@0.20,0.5@0.50,0'; per-component patterns (name=...) are not supported"
        )
    points = []
    for k, item in enumerate(items):
        value, _, at = item.partition("@")
        try:
            p = float(value)
            if k == 0:
                x = 0.0
            elif k == len(items) - 1:
                x = 1.0
            else:
                x = float(at) if at else 0.5
        except ValueError:
            raise ConfigError(f"{where}: {item!r} is not a number or number@x") from None
        if (k in (0, len(items) - 1)) and at:
            raise ConfigError(f"{where}: the first and last values take no @x")
        if not 0.0 <= p < 1.0:
            raise ConfigError(f"{where}: proportion {p} is outside [0, 1)")
        if not 0.0 <= x <= 1.0 or (points and x < points[-1][0]):
            raise ConfigError(f"{where}: positions must be in [0, 1] and not decrease")
        points.append((x, p))
    return tuple(points)


def dropout_proportion(text: str, data_fraction: float) -> float:
    """p(x) of the schedule at x = ``data_fraction`` (clamped to [0, 1])."""
    points = parse_dropout_schedule(text)
    x = min(max(float(data_fraction), 0.0), 1.0)
    k = bisect_right([px for px, _ in points], x)
    if k == 0:
        return points[0][1]
    if k == len(points):
        return points[-1][1]
    (x0, p0), (x1, p1) = points[k - 1], points[k]
    if x1 == x0:
        return p1
    return p0 + (p1 - p0) * (x - x0) / (x1 - x0)
