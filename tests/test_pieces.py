"""Byte pieces read as the characters they spell; broken byte runs kept apart."""

import numpy as np

from attnmt.pieces import group_links, group_weights, labels, piece_groups

# 龘 is E9 BE 98 in UTF-8; 😀 is F0 9F 98 80.
DRAGON = ["<0xE9>", "<0xBE>", "<0x98>"]
SMILE = ["<0xF0>", "<0x9F>", "<0x98>", "<0x80>"]


def test_a_run_of_byte_pieces_is_the_character_it_spells():
    pieces = ["▁我", *DRAGON, "<0x41>", *SMILE, "。", "</s>"]
    assert labels(pieces) == ["▁我", "龘", "A", "😀", "。", "</s>"]
    spans = [(g.start, g.end) for g in piece_groups(pieces)]
    assert spans == [(0, 1), (1, 4), (4, 5), (5, 9), (9, 10), (10, 11)]


def test_bytes_of_no_whole_character_are_broken_pieces_of_their_own():
    # a lone continuation byte, a character cut short, an overlong form, a lead byte no
    # UTF-8 character has
    pieces = ["<0x98>", "好", *DRAGON[:2], "<0xC0>", "<0x80>", "<0xFF>", *DRAGON]
    groups = piece_groups(pieces)
    assert [g.label for g in groups] == [
        "<0x98>",
        "好",
        "<0xE9>",
        "<0xBE>",
        "<0xC0>",
        "<0x80>",
        "<0xFF>",
        "龘",
    ]
    assert [g.broken for g in groups] == [True, False, True, True, True, True, True, False]
    assert labels(DRAGON[:2]) == DRAGON[:2]  # cut at the end of the pieces


def test_pieces_without_bytes_keep_their_weights_as_they_are():
    weights = np.arange(6, dtype=float).reshape(2, 3)
    grouped, source, target = group_weights(weights, ["我", "好", "</s>"], ["▁fine", "</s>"])
    assert grouped is weights and source == ["我", "好", "</s>"] and target == ["▁fine", "</s>"]


def test_a_character_s_column_sums_its_bytes_and_its_row_averages_them():
    # 3 target pieces (2 bytes of é, then EOS) x 5 source pieces (我, 3 bytes of 龘, EOS)
    weights = np.array(
        [
            [0.1, 0.2, 0.3, 0.3, 0.1],
            [0.5, 0.1, 0.1, 0.1, 0.2],
            [0.0, 0.0, 0.0, 0.0, 1.0],
        ]
    )
    grouped, source, target = group_weights(
        weights, ["我", *DRAGON, "</s>"], ["<0xC3>", "<0xA9>", "</s>"]
    )
    assert source == ["我", "龘", "</s>"] and target == ["é", "</s>"]
    expected = np.array([[0.3, 0.55, 0.15], [0.0, 0.0, 1.0]])
    assert grouped.shape == (2, 3) and np.allclose(grouped, expected)
    assert np.allclose(grouped.sum(1), 1.0)  # a row still sums to 1


def test_piece_links_become_links_between_groups():
    links = [(1, 0), (2, 0), (3, 1), (4, 2)]  # the three bytes of 龘 link to two targets
    found = group_links(links, ["我", *DRAGON, "</s>"], ["▁dragon", "s", "</s>"])
    assert found == [(1, 0), (1, 1), (2, 2)]
