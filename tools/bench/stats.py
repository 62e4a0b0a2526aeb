# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Statistics the bench scripts share: a mean and its 90 % confidence half-width."""
import math
import statistics

# Student t, two-sided 90 %, by sample size.
T90 = {2: 6.314, 3: 2.920, 4: 2.353, 5: 2.132, 6: 2.015, 7: 1.943, 8: 1.895, 9: 1.860,
       10: 1.833, 11: 1.812, 12: 1.796, 15: 1.761, 20: 1.729, 30: 1.699}


def ci90(values, single=math.inf):
    """(mean, half-width of its 90 % interval); `single` as the width of one value:
    by default none can be told (inf), so that no verdict is "met" on one replicate."""
    n = len(values)
    mean = statistics.mean(values)
    if n < 2:
        return mean, single
    t = T90.get(n) or T90[min(T90, key=lambda k: abs(k - n))]
    return mean, t * statistics.stdev(values) / math.sqrt(n)
