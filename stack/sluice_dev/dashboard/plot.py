"""The key panels as a PNG (matplotlib, no display needed): one plot per panel,
each series a line over the window, time in minutes before its end."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sluice_dev.dashboard.fetch import Answer


def write_png(answers: Sequence[Answer], path: Path, title: str = "Sluice") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels: dict[str, list[Answer]] = {}
    for answer in answers:
        panels.setdefault(answer.query.panel, []).append(answer)
    end = max((p[0] for a in answers for s in a.series for p in s.points), default=0.0)
    rows = (len(panels) + 1) // 2
    figure, axes = plt.subplots(rows, 2, figsize=(13, 3.4 * rows), squeeze=False)
    for index, (name, group) in enumerate(panels.items()):
        axis = axes[index // 2][index % 2]
        axis.set_title(name, fontsize=10)
        for answer in group:
            for series in answer.series:
                axis.plot(
                    [(t - end) / 60 for t, _v in series.points],
                    [v for _t, v in series.points],
                    label=series.name,
                    linewidth=1.2,
                )
            if not answer.has_data:
                axis.text(0.5, 0.5, "no data", ha="center", transform=axis.transAxes)
        axis.set_xlabel("minutes before the end of the window", fontsize=8)
        axis.tick_params(labelsize=8)
        if axis.get_legend_handles_labels()[0]:
            axis.legend(fontsize=7, loc="upper left")
    for index in range(len(panels), rows * 2):
        axes[index // 2][index % 2].axis("off")
    figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path
