"""PNG charts of the report (matplotlib, optional): task success and duplicate side effects by category, direct vs
proxy, and task success by policy and mode. ``draw_charts`` returns None when matplotlib is not installed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .metrics import aggregate

CATS = ("A", "B", "C", "D", "E", "F")
SHOWN = {"M0": "direct (M0)", "M1": "proxy, raw errors (M1)", "M3": "proxy, L2 observations (M3)"}


def draw_charts(rows: list[dict[str, Any]], out: Path) -> dict[str, str] | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    out.mkdir(parents=True, exist_ok=True)
    by = aggregate(rows, ("category", "mode"))
    paths = {}
    width = 0.8 / len(SHOWN)
    shown = (
        ("success_by_category", "task_success_rate", "task success rate"),
        ("duplicates_by_category", "duplicates", "duplicate side effects (count)"),
    )
    for name, metric, ylabel in shown:
        fig, ax = plt.subplots(figsize=(8, 4))
        for j, (mode, label) in enumerate(SHOWN.items()):
            values, errs = [], [[], []]
            for c in CATS:
                g = by.get(f"{c}|{mode}")
                if metric == "duplicates":
                    values.append(g[metric] if g else 0)
                    errs[0].append(0)
                    errs[1].append(0)
                else:
                    m = g[metric] if g else {"rate": 0, "lo": 0, "hi": 0}
                    values.append(m["rate"] or 0)
                    errs[0].append((m["rate"] or 0) - (m["lo"] or 0))
                    errs[1].append((m["hi"] or 0) - (m["rate"] or 0))
            xs = [i + (j - 1) * width for i in range(len(CATS))]
            ax.bar(xs, values, width, label=label, yerr=errs if metric != "duplicates" else None, capsize=2)
        ax.set_xticks(range(len(CATS)), [f"{c}" for c in CATS])
        ax.set_xlabel("fault category (A selection, B arguments, C transport, D execution, E results, F permission)")
        ax.set_ylabel(ylabel)
        ax.legend(fontsize=8)
        ax.set_title(f"{ylabel} by fault category, all scripted policies pooled")
        fig.tight_layout()
        path = out / f"{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths[name] = str(path)
    paths["success_by_policy"] = _by_policy(rows, out, plt)
    return paths


def _by_policy(rows: list[dict[str, Any]], out: Path, plt: Any) -> str:
    by = aggregate(rows, ("policy", "mode"))
    policies = sorted({r["policy"] for r in rows})
    modes = ("M0", "M1", "M2", "M3", "M4")
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / len(modes)
    for j, mode in enumerate(modes):
        values = [((by.get(f"{p}|{mode}") or {}).get("task_success_rate") or {}).get("rate") or 0 for p in policies]
        ax.bar([i + (j - 2) * width for i in range(len(policies))], values, width, label=mode)
    ax.set_xticks(range(len(policies)), policies, rotation=20, fontsize=8)
    ax.set_ylabel("task success rate")
    ax.set_title("task success by scripted policy and mode (M0 direct, M1-M4 proxy at L0-L3)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out / "success_by_policy.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)
