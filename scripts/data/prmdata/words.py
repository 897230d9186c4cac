"""This project's own grade-school word problems, for the error kinds the
reasoning-gym tasks do not give: a wrong formula (area for perimeter, an
average over the wrong count, a rate inverted, a percentage of the wrong
base) and off-by-one counts (fence posts, inclusive ranges). Each template
draws its numbers so that the correct solution is exact, and names the
wrong formula a solver plausibly writes (`Step.alts`)."""

from __future__ import annotations

from fractions import Fraction
from random import Random

from .calc import Math, Solution, Step, fmt_num, last, n, op, ref

NAMES = ["Maya", "Liam", "Ava", "Noah", "Zara", "Omar", "Ines", "Kenji", "Priya", "Lucas", "Amara", "Mateo", "Hana", "Tariq", "Elena", "Sam"]


def _say(pr: Random, *forms: str):
    """One of the phrasings, formatted from the step context (eq, e, r, vals)."""
    form = pr.choice(forms)
    return lambda c: form.format(eq=c.eq, e=c.e, r=c.r, v=c.vals)


def _cents(rng: Random, lo: int, hi: int) -> Fraction:
    """A price: whole dollars half the time, else with 25, 50 or 75 cents
    (correct solutions then carry decimals too, as real ones do)."""
    v = Fraction(rng.randint(lo, hi))
    return v if rng.random() < 0.5 else v + Fraction(rng.choice([1, 2, 3]), 4)


def _d(v) -> str:
    return fmt_num(Fraction(v))


def _pl(k: int, word: str) -> str:
    return f"{k} {word}" + ("" if k == 1 else "s")


def _pct_say(pr: Random, *forms: str):
    """Like _say, with the result written as a percentage."""
    form = pr.choice(forms)
    return lambda c: form.format(eq=c.m.eq(c.e, c.r + ("\\%" if c.m.wrap else "%")))


def _length_from_width(rng: Random, pr: Random, W: int, unit: str):
    """Half the time the length is stated relative to the width, which adds a
    step before the formula (so the formula's step is not always the first):
    returns (phrase for the question, steps before, the length's Expr, L)."""
    if pr.random() < 0.5:
        L = rng.randint(W + 1, W + 25)
        return f"{L} {unit} long and {W} {unit} wide", [], n(L), L
    if pr.random() < 0.5:
        d = rng.randint(2, 20)
        say = _say(pr, "The length is {eq} %s." % unit, "First, the length: {eq} %s." % unit)
        return f"{W} {unit} wide and {d} {unit} longer than it is wide", [Step(op("+", n(W), n(d)), say)], ref(0), W + d
    k = rng.randint(2, 4)
    say = _say(pr, "The length is {eq} %s." % unit, "It is {eq} %s long." % unit)
    return f"{W} {unit} wide and {k} times as long as it is wide", [Step(op("*", n(k), n(W)), say)], ref(0), k * W


def fence_cost(rng: Random, pr: Random, m: Math) -> Solution:
    W, price = rng.randint(3, 25), _cents(rng, 2, 15)
    place = pr.choice(["garden", "yard", "playground", "field", "pen"])
    dims, pre, Lx, L = _length_from_width(rng, pr, W, "meters")
    j = len(pre)
    q = f"A rectangular {place} is {dims}. Fencing costs ${_d(price)} per meter. How many dollars does it cost to put a fence around the whole {place}?"
    steps = pre + [
        Step(op("*", n(2, "const"), op("+", Lx, n(W))), _say(pr, f"The fence goes around the {place}, so we need the perimeter: {{eq}} meters.", "The perimeter is {eq} meters.", "Perimeter of the rectangle: {eq} m."), alts={"wrong_formula": op("*", Lx, n(W))}, drop=None),
        Step(op("*", ref(j), n(price)), _say(pr, "The fencing costs {eq} dollars.", f"At ${_d(price)} per meter, that is {{eq}} dollars.", "Cost: {eq} dollars.")),
    ]
    return Solution(q, steps, lambda r: fmt_num(last(r)), pnums=(Fraction(L), Fraction(W), Fraction(price)), math=m)


def tile_cost(rng: Random, pr: Random, m: Math) -> Solution:
    W, price, fee = rng.randint(4, 20), _cents(rng, 2, 9), rng.choice([25, 40, 50, 75, 100, 120])
    room = pr.choice(["kitchen", "bedroom", "hallway", "classroom", "bathroom"])
    name = pr.choice(NAMES)
    dims, pre, Lx, L = _length_from_width(rng, pr, W, "feet")
    j = len(pre)
    # Half the time the store takes a percentage off the tiles (a percent step).
    off = rng.choice([10, 20, 25, 50]) if pr.random() < 0.5 else None
    deal = f" The store takes {off}% off the price of the tiles." if off else ""
    q = f"{name} wants to tile a rectangular {room} floor that is {dims}. Tiles cost ${_d(price)} per square foot, and the installer charges a flat fee of ${fee}.{deal} How much will {name} pay in total?"
    steps = pre + [
        Step(op("*", Lx, n(W)), _say(pr, "The floor area is {eq} square feet.", "Area of the floor: {eq} sq ft.", "Now find the area of the floor: {eq} square feet."), alts={"wrong_formula": op("*", n(2, "const"), op("+", Lx, n(W)))}, drop=None),
        Step(op("*", ref(j), n(price)), _say(pr, "The tiles cost {eq} dollars.", "Tiles: {eq} dollars.")),
    ]
    if off:
        steps += [
            Step(op("*", ref(j + 1), n(Fraction(off, 100), "pct")), _say(pr, "The discount is {eq} dollars.", "{v[1]} off: {eq} dollars."), drop=None),
            Step(op("-", ref(j + 1), ref(j + 2)), _say(pr, "After the discount the tiles cost {eq} dollars.", "Tiles after the discount: {eq} dollars.")),
        ]
    k = len(steps) - 1
    steps.append(Step(op("+", ref(k), n(fee)), _say(pr, "Adding the fee, the total is {eq} dollars.", "Total cost: {eq} dollars.", "With the installer's fee: {eq} dollars.")))
    return Solution(q, steps, lambda r: fmt_num(last(r)), pnums=(Fraction(L), Fraction(W), Fraction(price), Fraction(fee)), math=m)


def average(rng: Random, pr: Random, m: Math) -> Solution:
    k = rng.randint(4, 6)
    mean = rng.randint(60, 92)
    scores = [mean + rng.randint(-12, 8) for _ in range(k - 1)]
    final = max(40, min(100, mean * k - sum(scores)))
    scores.append(final)
    total = sum(scores)
    # A whole average, or (half the time) one with at most two decimals.
    step = k if pr.random() < 0.5 else k // __import__("math").gcd(k, 100)
    if total % step:
        scores[-1] -= total % step
    name = pr.choice(NAMES)
    target = rng.randint(60, 80)
    subject = pr.choice(["math", "science", "history", "spelling"])
    q = f"{name}'s scores on {k} {subject} quizzes were {', '.join(map(str, scores[:-1]))} and {scores[-1]}. By how many points is {name}'s average above {target}?"
    wrong_count = pr.choice([k - 1, k + 1])
    steps = [
        Step(op("+", *[n(s) for s in scores]), _say(pr, "The scores add up to {eq}.", "Total of the scores: {eq}.", "Sum of all quiz scores: {eq}."), drop=None),
        Step(op("/", ref(0), n(k, "count")), _say(pr, "There are {k} quizzes, so the average is {eq}.".replace("{k}", str(k)), "The average is {eq}.", "Average score: {eq}."), alts={"wrong_formula": op("/", ref(0), n(wrong_count, "count"))}),
        Step(op("-", ref(1), n(target)), _say(pr, "The average is above {t} by {eq} points.".replace("{t}", str(target)), "Difference from {t}: {eq}.".replace("{t}", str(target)))),
    ]
    return Solution(q, steps, lambda r: fmt_num(last(r)), pnums=tuple(Fraction(s) for s in scores), math=m)


def average_needed(rng: Random, pr: Random, m: Math) -> Solution:
    k = rng.randint(3, 5)
    goal = rng.randint(70, 90)
    scores = [goal + rng.randint(-10, 10) for _ in range(k)]
    need = goal * (k + 1) - sum(scores)
    name = pr.choice(NAMES)
    q = f"{name} scored {', '.join(map(str, scores[:-1]))} and {scores[-1]} on the first {k} tests. What score does {name} need on test number {k + 1} to have an average of exactly {goal} over all {k + 1} tests?"
    steps = [
        Step(op("+", *[n(s) for s in scores]), _say(pr, "So far the scores total {eq}.", "The first {k} tests add up to {eq}.".replace("{k}", str(k))), drop=None),
        Step(op("*", n(goal), n(k + 1, "count")), _say(pr, "An average of {g} over {k1} tests means a total of {eq} points.".replace("{g}", str(goal)).replace("{k1}", str(k + 1)), "The needed total is {eq}."), alts={"wrong_formula": op("*", n(goal), n(k, "count"))}),
        Step(op("-", ref(1), ref(0)), _say(pr, "The last test needs {eq} points.", "So {name} needs {eq}.".replace("{name}", name))),
    ]
    sol = Solution(q, steps, lambda r: fmt_num(last(r)), pnums=tuple(Fraction(s) for s in scores) + (Fraction(goal),), math=m)
    return sol if 0 < need <= 100 else None


def _split_total(rng: Random, pr: Random, total: int, what: str, verb: str):
    """Half the time a given total is stated as two parts, which adds a step
    that sums them first: returns (phrase, steps before, the total's Expr)."""
    if pr.random() < 0.5 or total < 4:
        return f"{total} {what}", [], n(total)
    a = rng.randint(1, total - 1)
    say = _say(pr, "In total that is {eq} %s." % what, "Altogether: {eq} %s." % what)
    return f"{a} {what} and then another {total - a} {what}", [Step(op("+", n(a), n(total - a)), say)], None


def speed(rng: Random, pr: Random, m: Math) -> Solution:
    v, t, t2 = rng.randint(8, 90), rng.randint(2, 6), rng.randint(2, 9)
    d = v * t
    what = pr.choice(["train", "cyclist", "bus", "truck", "boat"])
    phrase, pre, dx = _split_total(rng, pr, d, "km", "travels")
    j = len(pre)
    dx = dx or ref(0)
    q = f"A {what} travels {phrase} in {t} hours in all. At the same speed, how many kilometers does it travel in {t2} hours?"
    steps = pre + [
        Step(op("/", dx, n(t)), _say(pr, "Its speed is {eq} km per hour.", "Speed = distance / time = {eq} km/h.", "Now find the speed: {eq} km per hour."), alts={"wrong_formula": op("/", n(t), dx)}, drop=None),
        Step(op("*", ref(j), n(t2)), _say(pr, f"In {t2} hours it travels {{eq}} km.", "Distance = {eq} km.")),
    ]
    return Solution(q, steps, lambda r: fmt_num(last(r)), pnums=(Fraction(d), Fraction(t), Fraction(t2)), math=m)


def unit_price(rng: Random, pr: Random, m: Math) -> Solution:
    each, k, k2 = _cents(rng, 2, 15), rng.randint(3, 12), rng.randint(2, 20)
    thing = pr.choice(["notebooks", "pens", "apples", "candles", "mugs", "tickets"])
    name = pr.choice(NAMES)
    budget = int(each * k2) + rng.randint(5, 60)
    if pr.random() < 0.5:
        q = f"{k} {thing} cost ${_d(each * k)}. {name} buys {k2} {thing} and pays with ${budget}. How much change does {name} get?"
        pre, cx = [], n(k)
    else:
        boxes = rng.choice([2, 3, 4])
        k = boxes * rng.randint(2, 6)
        q = f"{boxes} boxes with {k // boxes} {thing} each cost ${_d(each * k)} together. {name} buys {k2} {thing} and pays with ${budget}. How much change does {name} get?"
        pre, cx = [Step(op("*", n(boxes), n(k // boxes)), _say(pr, "That is {eq} %s." % thing, "The boxes hold {eq} %s." % thing))], ref(0)
    j = len(pre)
    steps = pre + [
        Step(op("/", n(each * k), cx), _say(pr, f"One of the {thing} costs {{eq}} dollars.", "The price of each is {eq} dollars.", "Price per item: {eq}."), alts={"wrong_formula": op("/", cx, n(each * k))}, drop=None),
        Step(op("*", ref(j), n(k2)), _say(pr, f"{k2} {thing} cost {{eq}} dollars.", "So the purchase costs {eq} dollars.")),
        Step(op("-", n(budget), ref(j + 1)), _say(pr, "The change is {eq} dollars.", "Change: {eq} dollars.")),
    ]
    return Solution(q, steps, lambda r: fmt_num(last(r)), pnums=(Fraction(each * k), Fraction(k), Fraction(k2), Fraction(budget)), math=m)


def rate_time(rng: Random, pr: Random, m: Math) -> Solution:
    rate, mins = rng.randint(3, 30), rng.randint(2, 8)
    pages = rate * mins
    pages2 = rate * rng.randint(3, 12)
    machine = pr.choice(["printer", "copier", "press"])
    phrase, pre, px = _split_total(rng, pr, pages, "pages", "prints")
    j = len(pre)
    px = px or ref(0)
    q = f"A {machine} prints {phrase} in {mins} minutes in all. How many minutes does it take to print {pages2} pages?"
    steps = pre + [
        Step(op("/", px, n(mins)), _say(pr, "It prints {eq} pages per minute.", "Rate: {eq} pages per minute."), alts={"wrong_formula": op("/", n(mins), px)}, drop=None),
        Step(op("/", n(pages2), ref(j)), _say(pr, f"So {pages2} pages take {{eq}} minutes.", "Time = {eq} minutes.")),
    ]
    return Solution(q, steps, lambda r: fmt_num(last(r)), pnums=(Fraction(pages), Fraction(mins), Fraction(pages2)), math=m)


def percent_change(rng: Random, pr: Random, m: Math) -> Solution:
    old = rng.choice([20, 25, 40, 50, 80, 120, 150, 200, 250, 400])
    pct = rng.choice([5, 10, 15, 20, 25, 30, 40, 50, 60, 75])
    rise = old * pct // 100
    if old * pct % 100:
        rise = old // 10
        pct = 10
    new = old + rise
    item = pr.choice(["bicycle", "concert ticket", "monthly bus pass", "gym membership", "textbook"])
    q = f"The price of a {item} went up from ${old} to ${new}. By what percent did the price increase?"
    steps = [
        Step(op("-", n(new), n(old)), _say(pr, "The price went up by {eq} dollars.", "Increase: {eq} dollars."), drop=None),
        Step(op("*", op("/", ref(0), n(old)), n(100, "const")), _pct_say(pr, "As a percent of the original price: {eq}.", "The percent increase is {eq}."), alts={"wrong_formula": op("*", op("/", ref(0), n(new)), n(100, "const")), "percent_unit": op("/", ref(0), n(old))}),
    ]
    return Solution(q, steps, lambda r: fmt_num(last(r)) + "%", pnums=(Fraction(old), Fraction(new)), math=m)


def discount(rng: Random, pr: Random, m: Math) -> Solution:
    price = rng.choice([20, 40, 60, 80, 120, 150, 200, 240])
    pct = rng.choice([10, 15, 20, 25, 30, 40, 50])
    k = rng.randint(2, 5)
    thing = pr.choice(["jacket", "pair of shoes", "backpack", "lamp", "board game"])
    q = f"A {thing} costs ${price}. During a sale everything is {pct}% off. How much do {k} of them cost during the sale?"
    steps = [
        Step(op("*", n(price), n(Fraction(pct, 100), "pct")), _say(pr, "The discount is {eq} dollars.", "{v[1]} of {v[0]} is {r} dollars off.", "Discount per item: {eq} dollars."), drop=None),
        Step(op("-", n(price), ref(0)), _say(pr, "The sale price is {eq} dollars.", "Each one costs {eq} dollars on sale.")),
        Step(op("*", ref(1), n(k)), _say(pr, "{k} of them cost {eq} dollars.".replace("{k}", str(k)), "Total: {eq} dollars.")),
    ]
    sol = Solution(q, steps, lambda r: fmt_num(last(r)), pnums=(Fraction(price), Fraction(pct), Fraction(k)), math=m)
    return sol


def fence_posts(rng: Random, pr: Random, m: Math) -> Solution:
    gap, count = rng.choice([2, 3, 4, 5, 6, 8, 10]), rng.randint(5, 30)
    length, price = gap * count, _cents(rng, 3, 20)
    if pr.random() < 0.5:
        where, pre, lx = f"A straight fence is {length} meters long", [], n(length)
    else:
        a = gap * rng.randint(1, count - 1)
        where = f"A straight fence is built in two straight sections of {a} meters and {length - a} meters, end to end,"
        pre, lx = [Step(op("+", n(a), n(length - a)), _say(pr, "The fence is {eq} meters long.", "Total length: {eq} m."))], ref(0)
    j = len(pre)
    q = f"{where} with a post every {gap} meters, including one at each end. Each post costs ${_d(price)}. How much do the posts cost?"
    steps = pre + [
        Step(op("+", op("/", lx, n(gap)), n(1, "const")), _say(pr, "There are {eq} posts, counting both ends.", "Number of posts: {eq}.", "The fence has {v[0]} / {v[1]} gaps, so {eq} posts."), alts={"off_by_one": op("/", lx, n(gap))}, drop=None),
        Step(op("*", ref(j), n(price)), _say(pr, "The posts cost {eq} dollars.", "Cost: {eq} dollars.")),
    ]
    return Solution(q, steps, lambda r: fmt_num(last(r)), pnums=(Fraction(length), Fraction(gap), Fraction(price)), math=m)


def _inclusive(lo: int, hi: int) -> tuple:
    """hi - lo + 1, and the off-by-one a solver writes instead (hi - lo)."""
    return op("+", op("-", n(hi), n(lo)), n(1, "const")), {"off_by_one": op("-", n(hi), n(lo))}


def pages(rng: Random, pr: Random, m: Math) -> Solution:
    p = rng.randint(5, 150)
    q_ = p + rng.randint(8, 60)
    name = pr.choice(NAMES)
    e0, alt0 = _inclusive(p, q_)
    if pr.random() < 0.5:
        mult = rng.choice([2, 3])
        word = {2: "twice", 3: "three times"}[mult]
        q = f"On Monday {name} read from page {p} to page {q_} of a novel, both pages included. On Tuesday {name} read {word} as many pages. How many pages did {name} read on the two days together?"
        second = Step(op("*", ref(0), n(mult)), _say(pr, "On Tuesday: {eq} pages.", "Tuesday's pages: {eq}."))
        nums = (p, q_, mult)
    else:
        r_ = q_ + rng.randint(8, 60)
        q = f"On Monday {name} read from page {p} to page {q_} of a novel, and on Tuesday from page {q_ + 1} to page {r_}, both ends included each day. How many pages did {name} read on the two days together?"
        e1, alt1 = _inclusive(q_ + 1, r_)
        second = Step(e1, _say(pr, "On Tuesday: {eq} pages.", "Tuesday's pages (both ends included): {eq}."), alts=alt1, drop=None)
        nums = (p, q_, q_ + 1, r_)
    steps = [
        Step(e0, _say(pr, f"On Monday {name} read {{eq}} pages.", "Pages on Monday (both ends included): {eq}."), alts=alt0, drop=None),
        second,
        Step(op("+", ref(0), ref(1)), _say(pr, "Together: {eq} pages.", "In total {eq} pages.")),
    ]
    return Solution(q, steps, lambda r: fmt_num(last(r)), pnums=tuple(map(Fraction, nums)), math=m)


def days_range(rng: Random, pr: Random, m: Math) -> Solution:
    d1 = rng.randint(1, 12)
    d2 = d1 + rng.randint(4, 16)
    hours, rate = rng.randint(2, 8), rng.choice([10, 12, 15, 18, 20, 25, Fraction(25, 2), Fraction(31, 2), Fraction(35, 2)])
    month = pr.choice(["March", "May", "July", "October"])
    name = pr.choice(NAMES)
    e0, alt0 = _inclusive(d1, d2)
    pre = []
    if pr.random() < 0.5:
        q = f"{name} works at a summer camp every day from {month} {d1} to {month} {d2}, inclusive, for {hours} hours a day, and is paid ${_d(rate)} per hour. How much does {name} earn?"
        hx = n(hours)
    else:
        h1 = rng.randint(1, hours - 1) if hours > 1 else 1
        q = f"{name} works at a summer camp every day from {month} {d1} to {month} {d2}, inclusive: {_pl(h1, 'hour')} in the morning and {_pl(hours - h1, 'hour')} in the afternoon, at ${_d(rate)} per hour. How much does {name} earn?"
        pre = [Step(op("+", n(h1), n(hours - h1)), _say(pr, "Each day is {eq} hours of work.", "Hours per day: {eq}."))]
        hx = ref(0)
    j = len(pre)
    steps = pre + [
        Step(e0, _say(pr, f"From {month} {d1} to {month} {d2} inclusive is {{eq}} days.", "Number of days: {eq}."), alts=alt0, drop=None),
        Step(op("*", ref(j), hx), _say(pr, "That is {eq} hours of work.", "Hours worked: {eq}.")),
        Step(op("*", ref(j + 1), n(rate)), _say(pr, f"{name} earns {{eq}} dollars.", "Earnings: {eq} dollars.")),
    ]
    return Solution(q, steps, lambda r: fmt_num(last(r)), pnums=(Fraction(d1), Fraction(d2), Fraction(hours), Fraction(rate)), math=m)


def number_puzzle(rng: Random, pr: Random, m: Math) -> Solution:
    """A two-step linear equation in words (the sign error of moving a term)."""
    x, a = rng.randint(2, 40), rng.randint(2, 9)
    b = rng.randint(3, 60) * rng.choice([1, -1])
    c = a * x + b
    name = pr.choice(NAMES)
    told = f"adds {b}" if b > 0 else f"subtracts {-b}"
    q = f"{name} thinks of a number, multiplies it by {a}, then {told}, and gets {c}. What was the number?"
    if b > 0:
        e0, alt = op("-", n(c), n(b)), op("+", n(c), n(b))
        first = f"Undo the addition: {a} times the number is {{eq}}."
    else:
        e0, alt = op("+", n(c), n(-b)), op("-", n(c), n(-b))
        first = f"Undo the subtraction: {a} times the number is {{eq}}."
    steps = [
        Step(e0, _say(pr, first, f"Before the last step the result was {{eq}}."), alts={"sign_error": alt}, drop=None),
        Step(op("/", ref(0), n(a)), _say(pr, "So the number is {eq}.", "Dividing by %d: {eq}." % a), drop=None),
    ]
    return Solution(q, steps, lambda r: fmt_num(last(r)), nonneg=False, pnums=(Fraction(a), Fraction(abs(b)), Fraction(c)), math=m)


TEMPLATES = {
    "word_fence_cost": fence_cost,
    "word_tile_cost": tile_cost,
    "word_average": average,
    "word_average_needed": average_needed,
    "word_speed": speed,
    "word_unit_price": unit_price,
    "word_rate_time": rate_time,
    "word_percent_change": percent_change,
    "word_discount": discount,
    "word_fence_posts": fence_posts,
    "word_pages": pages,
    "word_days_range": days_range,
    "word_number_puzzle": number_puzzle,
}
