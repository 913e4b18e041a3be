"""VQA and retrieval manifests: reading, one error per bad input, fingerprints and --limit's image sample."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from domainbench.data.manifests import is_yes_no, load_retrieval_manifest, load_vqa_manifest
from domainbench.errors import UserInputError


def _img(path: Path, value: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((8, 8, 3), value, np.uint8)).save(path)


def _jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def imgs(tmp_path: Path) -> Path:
    for i in range(6):
        _img(tmp_path / "im" / f"{i}.png", 20 * i)
    return tmp_path


def test_vqa_jsonl_groups_questions_by_image(imgs: Path) -> None:
    m = load_vqa_manifest(_jsonl(imgs / "q.jsonl", [
        {"image": "im/0.png", "question": "Is this a shoe?", "answers": ["yes"] * 10, "answer_type": "yes/no"},
        {"image": "im/1.png", "question": "What is it?", "answers": ["bag", "purse"]},
        {"image": "im/0.png", "question": "Which?", "choices": ["Bag", "Shoe"], "answers": ["shoe"]},
    ]))
    assert len(m) == 3 and len(m.images) == 2 and m.image_of.tolist() == [0, 1, 0]
    assert m.images[0] == (imgs / "im" / "0.png").resolve() and m.line_of == [1, 2, 3]
    assert m.rows[2].choices == ("Bag", "Shoe") and m.rows[1].answer_type is None
    assert [is_yes_no(r) for r in m.rows] == [True, False, False]
    assert m.open_questions() == [1] and m.has_references


def test_vqa_csv_reads_json_lists_and_plain_cells(imgs: Path) -> None:
    (imgs / "q.csv").write_text('image,question,answers,choices,answer_type\n'
                                'im/0.png,"Is it red, really?","[""yes"", ""no""]",,yes/no\n'
                                'im/1.png,What is it?,bag,,\n', encoding="utf-8")
    m = load_vqa_manifest(imgs / "q.csv")
    assert m.rows[0].question == "Is it red, really?" and m.rows[0].answers == ("yes", "no")
    assert m.rows[1].answers == ("bag",) and m.rows[1].choices is None and m.line_of == [2, 3]


BAD_VQA = [
    ({"question": "Is it?"}, r"line 1 has no `image`; give every row `image` and `question`"),
    ({"image": "im/0.png"}, r"line 1 has no `question`"),
    ({"image": "im/9.png", "question": "q"}, r"line 1: image im/9.png does not exist .*fix the path"),
    ({"image": "im/0.png", "question": "q", "answers": [1, "two"]}, r"line 1: answers: .*item 0 is int 1; quote it"),
    ({"image": "im/0.png", "question": "q", "choices": ["a", "b"], "answers": ["c"]},
     r"line 1: reference answer\(s\) \['c'\] are not among the choices \['a', 'b'\]; add them to `choices`"),
    ({"image": "im/0.png", "question": "q", "answer_type": "count"}, r"answer_type 'count' is not one of yes/no"),
    ({"image": "im/0.png", "question": "q", "answer": ["x"]}, r"unknown field `answer`; fields are image, question"),
    ({"image": "im/0.png", "question": "  "}, r"line 1: question: must be a non-empty string"),
    (["im/0.png", "q"], r"line 1 is a JSON list, not an object"),
]


@pytest.mark.parametrize(("row", "message"), BAD_VQA)
def test_each_bad_vqa_row_gets_one_error_naming_the_row_and_the_fix(imgs: Path, row: object, message: str) -> None:
    with pytest.raises(UserInputError, match=message):
        load_vqa_manifest(_jsonl(imgs / "q.jsonl", [row]))


def test_bad_files(imgs: Path) -> None:
    (imgs / "latin.csv").write_bytes("image,question\nim/0.png,caf\xe9?\n".encode("latin-1"))
    with pytest.raises(UserInputError, match=r"latin.csv is not UTF-8 text \(byte offset 27.*save it as UTF-8"):
        load_vqa_manifest(imgs / "latin.csv")
    (imgs / "noq.csv").write_text("image,answers\nim/0.png,yes\n")
    with pytest.raises(UserInputError, match=r"needs a header row with column\(s\) question"):
        load_vqa_manifest(imgs / "noq.csv")
    (imgs / "bad.jsonl").write_text('{"image": "im/0.png", "question": "q"}\n{oops\n')
    with pytest.raises(UserInputError, match=r"bad.jsonl line 2 is not JSON"):
        load_vqa_manifest(imgs / "bad.jsonl")
    (imgs / "list.csv").write_text('image,question,answers\nim/0.png,q,"[""a"", 3"\n')
    with pytest.raises(UserInputError, match=r"record 2: `answers` .* is not a JSON list"):
        load_vqa_manifest(imgs / "list.csv")
    (imgs / "empty.jsonl").write_text("\n\n")
    with pytest.raises(UserInputError, match="lists no questions"):
        load_vqa_manifest(imgs / "empty.jsonl")
    with pytest.raises(UserInputError, match=r"must be a .jsonl or .csv file"):
        load_vqa_manifest(imgs / "q.txt")


def test_retrieval_manifest_and_its_errors(imgs: Path) -> None:
    m = load_retrieval_manifest(_jsonl(imgs / "r.jsonl", [
        {"image": "im/0.png", "captions": ["a dark square", "black"]},
        {"image": "im/1.png", "captions": "a grey square"},
    ]))
    assert m.captions == ["a dark square", "black", "a grey square"] and m.caption_image.tolist() == [0, 0, 1]
    for rows, message in [
        ([{"image": "im/0.png"}], r"line 1 has no `captions`"),
        ([{"image": "im/0.png", "captions": []}], r"line 1: captions: `captions` needs one or more"),
        ([{"image": "im/0.png", "captions": [7]}], r"item 0 is int 7"),
        ([{"image": "im/0.png", "captions": ["x"]}, {"image": "im/0.png", "captions": ["y"]}],
         r"line 2: image im/0.png is already listed in line 1; put all of an image's captions in one row"),
    ]:
        with pytest.raises(UserInputError, match=message):
            load_retrieval_manifest(_jsonl(imgs / "r.jsonl", rows))


def test_limit_is_a_seeded_sample_of_images_with_all_their_questions(imgs: Path) -> None:
    rows = [{"image": f"im/{i % 6}.png", "question": f"q{k}"} for k, i in enumerate(range(18))]
    m = load_vqa_manifest(_jsonl(imgs / "q.jsonl", rows))
    a, b, c = m.subset(3, seed=1), m.subset(3, seed=1), m.subset(3, seed=2)
    assert a.images == b.images and len(a.images) == 3 and len(a) == 9
    expected = np.sort(np.random.default_rng(1).choice(6, size=3, replace=False))
    assert a.origin.tolist() == expected.tolist()  # type: ignore[union-attr]
    assert a.images == [m.images[i] for i in expected]
    # every question of a kept image, none of another, in manifest order
    kept = [r.question for r, i in zip(m.rows, m.image_of) if i in expected]
    assert [r.question for r in a.rows] == kept
    assert all(a.images[a.image_of[q]] == m.images[m.image_of[m.rows.index(a.rows[q])]] for q in range(len(a)))
    assert c.origin.tolist() == np.sort(np.random.default_rng(2).choice(6, size=3, replace=False)).tolist()  # type: ignore[union-attr]
    assert m.subset(None) is m and m.subset(6) is m
    with pytest.raises(UserInputError, match="positive"):
        m.subset(0)
    r = load_retrieval_manifest(_jsonl(imgs / "r.jsonl", [{"image": f"im/{i}.png", "captions": [f"c{i}"]}
                                                          for i in range(6)]))
    assert r.subset(2, seed=1).captions == [f"c{i}" for i in np.sort(np.random.default_rng(1).choice(6, 2, replace=False))]


def test_fingerprint_pins_images_and_questions(imgs: Path) -> None:
    path = _jsonl(imgs / "q.jsonl", [{"image": "im/0.png", "question": "q"}, {"image": "im/1.png", "question": "r"}])
    first = load_vqa_manifest(path).fingerprint()
    assert first == load_vqa_manifest(path).fingerprint() and first.images.files == 2 and first.rows == 2
    _jsonl(path, [{"image": "im/0.png", "question": "q"}, {"image": "im/1.png", "question": "changed"}])
    assert first.differences(load_vqa_manifest(path).fingerprint()) == "manifest rows"
    _jsonl(path, [{"image": "im/0.png", "question": "q"}, {"image": "im/1.png", "question": "r"}])
    _img(imgs / "im" / "1.png", 255)
    assert "file contents)" in first.differences(load_vqa_manifest(path).fingerprint())
    assert load_vqa_manifest(path).subset(1).fingerprint().rows == 1
