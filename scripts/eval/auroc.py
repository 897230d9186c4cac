"""Step and solution AUROC for the eval scripts: the core's metric
(`stepscore.auroc`, the one `stepscore eval` reports: the probability that a
random good item scores above a random bad one, ties counting one half), fed
from a list of good items' scores and a list of bad ones'. NaN when either
list is empty (the scripts' tables print it; the core says None)."""
import math

import stepscore


def auroc(good, bad):
    """AUROC of `good` above `bad` (any iterables of numbers)."""
    good = [float(x) for x in good]
    bad = [float(x) for x in bad]
    value = stepscore.auroc(good + bad, [True] * len(good) + [False] * len(bad))
    return math.nan if value is None else value


def auroc_labelled(scores, labels):
    """AUROC of the items whose label is true (1) above those whose label is false (0)."""
    pairs = list(zip(scores, labels))
    return auroc([s for s, y in pairs if y], [s for s, y in pairs if not y])
