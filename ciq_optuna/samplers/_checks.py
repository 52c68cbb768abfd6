"""How often a trial predicted to repeat a compiled binary is compiled anyway, as a check.

A check costs a compile that the prediction would have saved; it is worth it in proportion to the
chance that the prediction is wrong.  That chance differs between kernels (and between kinds of
prediction), so :class:`CheckRates` estimates it from the checks of the study itself: each kind's
rate is the posterior mean of its error rate, under a Beta prior whose mean is the fixed rate and
whose weight is ``prior_wrong / rate`` checks.  Checks found right lower the rate, a wrong one raises
it again (above the fixed rate when wrong ones are common).
"""

from __future__ import annotations

PLAIN, DOUBTFUL = 0, 1


class CheckRates:
    """Check rates per kind of prediction: plain (``doubt == 0``) and doubtful (an inertness
    stretched to a context not seen yet; ``BinaryModel.predict``).

    Args:
        plain: the fixed rate of plain predictions (the prior mean).
        doubtful: the fixed rate of a doubtful prediction, per unit of doubt (the prior mean).
        prior_wrong: weight of the prior in wrong checks; 0 keeps the fixed rates whatever the checks say.
    """

    def __init__(self, plain: float, doubtful: float, prior_wrong: float = 0.0) -> None:
        self._fixed = (plain, doubtful)
        self._prior_wrong = prior_wrong
        self._checks = [0, 0]
        self._wrong = [0, 0]

    @property
    def adaptive(self) -> bool:
        """Whether the rates follow the checks."""
        return self._prior_wrong > 0

    def record(self, kind: int, wrong: bool) -> None:
        """One check of a prediction of ``kind`` (PLAIN or DOUBTFUL): its binary was not the one predicted (``wrong``) or was."""
        self._checks[kind] += 1
        self._wrong[kind] += bool(wrong)

    def base(self, kind: int) -> float:
        """The rate of one unit of ``kind``: the fixed rate, or its posterior mean given the checks."""
        fixed = self._fixed[kind]
        if not self.adaptive or fixed <= 0.0:
            return fixed
        if fixed >= 1.0:
            return 1.0
        prior_checks = self._prior_wrong / fixed
        return min(1.0, (self._wrong[kind] + self._prior_wrong) / (self._checks[kind] + prior_checks))

    def rate(self, doubt: int) -> float:
        """Probability of compiling a prediction with this doubt (0: plain) as a check; the more
        doubt, the more checks: ``1 - (1 - r) ** doubt`` with ``r`` the doubtful rate."""
        if not doubt:
            return self.base(PLAIN)
        return 1.0 - (1.0 - self.base(DOUBTFUL)) ** doubt

    def counts(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """(checks, wrong) of plain and of doubtful predictions so far."""
        return (self._checks[PLAIN], self._wrong[PLAIN]), (self._checks[DOUBTFUL], self._wrong[DOUBTFUL])
