"""Hints for trials-search words that cannot match as written (issue 46, item 5: ``lr:abc`` gave no hint)."""

from __future__ import annotations

from trialfleet.storage.search import search_hints

SPACE = {
    "lr": {"_type": "loguniform", "_value": [0.0001, 0.1]},
    "batch_size": {"_type": "choice", "_value": [16, 32, 64]},
    "optimizer": {"_type": "choice", "_value": ["sgd", "adam"]},
}


def test_a_number_parameter_searched_with_words_is_explained() -> None:
    (hint,) = search_hints("lr:abc", SPACE)
    assert hint.startswith("lr:abc: lr takes numbers: lr:0.001..0.01")
    assert search_hints("batch_size:big", SPACE)[0].startswith("batch_size:big: batch_size takes numbers")


def test_an_unknown_parameter_is_named_with_the_known_ones() -> None:
    assert search_hints("momentum:0.9", SPACE) == [
        "momentum:0.9: the search space has no parameter 'momentum' (batch_size, lr, optimizer)"
    ]


def test_words_that_can_match_get_no_hint() -> None:
    for search in ("lr:0.001..0.01", "lr:..0.1", "batch_size:32,64", "optimizer:adam", "status:running", "adam", "#3"):
        assert search_hints(search, SPACE) == [], search
    assert search_hints("lr:abc", None) == []  # no search space: nothing to compare with
