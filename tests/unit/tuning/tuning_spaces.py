"""Hypothesis strategies for valid NNI search spaces, nested choices included."""

from __future__ import annotations

from hypothesis import strategies as st

_names = st.text(alphabet="abcdefghij_", min_size=1, max_size=6).filter(lambda n: n != "_name")
_small = st.floats(min_value=-20, max_value=20, allow_nan=False, allow_infinity=False)
_q = st.sampled_from([0.1, 0.5, 1, 2, 5])


@st.composite
def _uniform_like(draw, type_):
    low = draw(st.floats(min_value=1e-3, max_value=50) if "log" in type_ else _small)
    width = draw(st.floats(min_value=0.01, max_value=100))
    values = [low, low + width]
    return {"_type": type_, "_value": values + ([draw(_q)] if type_.startswith("q") else [])}


@st.composite
def _normal_like(draw, type_):
    mu = draw(st.floats(min_value=-3, max_value=3)) if "log" in type_ else draw(_small)
    sigma = draw(st.floats(min_value=0.05, max_value=2))
    return {"_type": type_, "_value": [mu, sigma] + ([draw(_q)] if type_.startswith("q") else [])}


@st.composite
def _randint(draw):
    lower = draw(st.integers(-5, 5))
    return {"_type": "randint", "_value": [lower, lower + draw(st.integers(1, 6))]}


_option = st.one_of(st.integers(-100, 100), st.text(max_size=4), st.floats(-10, 10, allow_nan=False))
_choice = st.lists(_option, min_size=1, max_size=4, unique_by=repr).map(
    lambda v: {"_type": "choice", "_value": v}
)


def leaf_spec(
    types=(
        "choice",
        "randint",
        "uniform",
        "quniform",
        "loguniform",
        "qloguniform",
        "normal",
        "qnormal",
        "lognormal",
        "qlognormal",
    ),
):
    options = []
    for type_ in types:
        if type_ == "choice":
            options.append(_choice)
        elif type_ == "randint":
            options.append(_randint())
        elif "normal" in type_:
            options.append(_normal_like(type_))
        else:
            options.append(_uniform_like(type_))
    return st.one_of(options)


@st.composite
def _nested_choice(draw, depth):
    count = draw(st.integers(1, 3))
    options = []
    for index in range(count):
        children = draw(st.dictionaries(_names, _spec(depth - 1), max_size=2))
        options.append({"_name": f"opt{index}", **children})
    return {"_type": "choice", "_value": options}


def _spec(depth):
    if depth <= 0:
        return leaf_spec()
    return st.one_of(leaf_spec(), _nested_choice(depth))


def search_spaces(nested=True, types=None):
    spec = _spec(2) if nested else (leaf_spec(types) if types else leaf_spec())
    return st.dictionaries(_names, spec, min_size=1, max_size=4)
