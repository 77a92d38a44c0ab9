"""Every scalar of a run's TensorBoard logs, as TensorBoard itself reads them.

    python tb_scalars.py TB_DIR

loads each run directory under TB_DIR (hacrl writes OUT/tb/<agent>/ and
OUT/tb/run/) with TensorBoard's EventAccumulator, keeping every event
(size_guidance 0: no reservoir sampling) and purging orphaned data as
TensorBoard does by default, and prints
{"runs": {run: {tag: [[step, value, wall_time], ...]}}} with values as
TensorBoard gives them (float32 widened to float; NaN and infinities as the
strings "nan", "inf", "-inf").
"""

import json
import math
import os
import sys

from tensorboard.backend.event_processing import event_accumulator


def number(v):
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def main():
    root = sys.argv[1]
    runs = {}
    for run in sorted(os.listdir(root)):
        path = os.path.join(root, run)
        if not os.path.isdir(path):
            continue
        acc = event_accumulator.EventAccumulator(path, size_guidance={event_accumulator.SCALARS: 0})
        acc.Reload()
        runs[run] = {
            tag: [[e.step, number(e.value), e.wall_time] for e in acc.Scalars(tag)]
            for tag in acc.Tags()[event_accumulator.SCALARS]
        }
    json.dump({"runs": runs}, sys.stdout)


if __name__ == "__main__":
    main()
