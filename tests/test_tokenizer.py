"""The raw-text tokenizer: Punkt sentences (shipped parameters), span-based Treebank words."""

from __future__ import annotations

import gzip
import pickle
import random
import string

import nltk.data
import pytest
from nltk.tokenize import NLTKWordTokenizer
from nltk.tokenize.punkt import PunktLanguageVars, PunktSentenceTokenizer

from elmo_model.text import build_punkt
from elmo_model.text.tokenizer import (
    BUILD_COMMAND,
    DEFAULT_PARAMS_DIR,
    PUNKT_FILES,
    OrthoContextTable,
    Tokenizer,
    _PunktSplitter,
    get_tokenizer,
    read_punkt_params,
    split_sentences,
    tokenize,
    tokenize_words,
    write_punkt_params,
)

N_LINES = 150  # paragraphs of each validation file the real-data tests read


@pytest.fixture(scope="module")
def real_paragraphs(data_root):
    """The first paragraphs of wiki-valid and gutenberg-valid (one paragraph a line)."""
    paragraphs = []
    for name in ("wiki-valid.txt.gz", "gutenberg-valid.txt.gz"):
        with gzip.open(data_root / "lm_corpus" / name, "rt", encoding="utf-8") as lines:
            for _, line in zip(range(N_LINES), lines):
                paragraphs.append(line.rstrip("\n"))
    return paragraphs


def assert_spans_cover(text: str, spans: list[tuple[int, int]]) -> None:
    """Spans are in order, disjoint, whitespace-free and cover every other character."""
    point = 0
    for start, end in spans:
        assert point <= start < end <= len(text)
        assert not any(ch.isspace() for ch in text[start:end]), text[start:end]
        assert text[point:start].strip() == "", f"uncovered {text[point:start]!r}"
        point = end
    assert text[point:].strip() == ""


# ---- the shipped parameters ---------------------------------------------------------------


def test_shipped_params_load_without_nltk_data_or_pickle(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the tokenizer must not use nltk.data or unpickle anything")

    monkeypatch.setattr(nltk.data, "path", [])
    monkeypatch.setattr(nltk.data, "find", refuse)
    monkeypatch.setattr(nltk.data, "load", refuse)
    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)

    tokenizer = Tokenizer.from_directory(DEFAULT_PARAMS_DIR)
    params = tokenizer.punkt_params
    assert {"dr", "mr", "mrs", "u.s", "e.g", "i.e", "etc"} <= params.abbrev_types
    assert {"however", "the", "he"} <= params.sent_starters
    assert all(len(pair) == 2 for pair in params.collocations)
    assert isinstance(params.ortho_context, OrthoContextTable)
    assert len(params.ortho_context) > 5000
    assert tokenizer.split_sentences("Dr. Smith left. He came back.") == [
        "Dr. Smith left.", "He came back."]


def test_shipped_files_are_small_plain_text_and_documented():
    files = [DEFAULT_PARAMS_DIR / name for name in PUNKT_FILES]
    assert sum(path.stat().st_size for path in files) < 200_000
    for path in files:
        path.read_bytes().decode("utf-8")  # text, not a pickle
    readme = (DEFAULT_PARAMS_DIR / "README.md").read_text(encoding="utf-8")
    assert BUILD_COMMAND in readme and "wiki-train-00.txt.gz" in readme


def test_params_round_trip_byte_for_byte(tmp_path):
    params = read_punkt_params(DEFAULT_PARAMS_DIR)
    write_punkt_params(params, tmp_path)
    for name in PUNKT_FILES:
        assert (tmp_path / name).read_bytes() == (DEFAULT_PARAMS_DIR / name).read_bytes(), name
    again = read_punkt_params(tmp_path)
    assert again.abbrev_types == params.abbrev_types
    assert again.collocations == params.collocations
    assert again.sent_starters == params.sent_starters
    assert dict(again.ortho_context) == dict(params.ortho_context)


def test_missing_or_malformed_params_name_the_file_and_the_fix(tmp_path):
    write_punkt_params(read_punkt_params(DEFAULT_PARAMS_DIR), tmp_path)
    (tmp_path / "sent_starters.txt").unlink()
    with pytest.raises(FileNotFoundError, match="sent_starters.txt.*build_punkt"):
        read_punkt_params(tmp_path)

    write_punkt_params(read_punkt_params(DEFAULT_PARAMS_DIR), tmp_path)
    (tmp_path / "ortho_context.tab").write_text("the\t2\nsmith\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"ortho_context.tab:2: expected 2"):
        read_punkt_params(tmp_path)
    (tmp_path / "ortho_context.tab").write_text("the\tmany\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not an integer"):
        read_punkt_params(tmp_path)


def test_unseen_words_do_not_grow_the_ortho_table():
    tokenizer = Tokenizer.from_directory(DEFAULT_PARAMS_DIR)
    before = len(tokenizer.punkt_params.ortho_context)
    tokenizer.split_sentences("It was Dr. Qwxzyv. Zzyzzx Blorptastic met Mr. Fnordwig.")
    assert len(tokenizer.punkt_params.ortho_context) == before


def test_get_tokenizer_is_loaded_once():
    assert get_tokenizer() is get_tokenizer()


# ---- sentences ----------------------------------------------------------------------------


def test_abbreviation_does_not_end_a_sentence():
    assert split_sentences("Dr. Smith went to Washington. He left.") == [
        "Dr. Smith went to Washington.", "He left."]
    assert split_sentences("Mr. and Mrs. Jones came at 5 p.m. on Monday, i.e. late.") == [
        "Mr. and Mrs. Jones came at 5 p.m. on Monday, i.e. late."]


def test_us():
    assert split_sentences("He moved to the U.S. in 1990. Then he left.") == [
        "He moved to the U.S. in 1990.", "Then he left."]
    assert split_sentences("The U.S. Army was founded in 1775. It fought the British.") == [
        "The U.S. Army was founded in 1775.", "It fought the British."]
    # Mid-sentence "U.S." is one token; at the end of a sentence Treebank splits off the period.
    assert tokenize_words("The U.S. Army won.") == ["The", "U.S.", "Army", "won", "."]
    assert tokenize("He lives in the U.S. She lives in Canada.") == [
        ["He", "lives", "in", "the", "U.S", "."], ["She", "lives", "in", "Canada", "."]]


def test_question_or_exclamation_before_a_lower_case_word_does_not_end_a_sentence():
    assert split_sentences('"Are you coming?" she asked. "No!" He shut the door.') == [
        '"Are you coming?" she asked.', '"No!"', "He shut the door."]
    assert split_sentences("“Why?” said he. “Because.”") == [
        "“Why?” said he.", "“Because.”"]


def test_newline_is_a_paragraph_boundary():
    text = "The cat sat on the\nmat. It slept.\r\n\n   Indented para here  \nlast"
    assert split_sentences(text) == [
        "The cat sat on the", "mat.", "It slept.", "Indented para here", "last"]
    spans = get_tokenizer().sentence_spans(text)
    assert [text[s:e] for s, e in spans] == split_sentences(text)
    assert all("\n" not in text[s:e] for s, e in spans)


def test_sentences_match_plain_nltk_punkt_on_real_data(real_paragraphs):
    """Our speed-ups (untimed regexes, C whitespace scan) change no decision of nltk's Punkt."""

    class TimedVars(PunktLanguageVars):  # nltk's own regex path, same word starts as ours
        __slots__ = ()
        _re_word_start = PunktLanguageVars._re_word_start[:-1] + "\u201c\u2018\u00ab\u201e]"

    plain = PunktSentenceTokenizer(read_punkt_params(DEFAULT_PARAMS_DIR), lang_vars=TimedVars())
    ours = get_tokenizer()
    compared = 0
    for paragraph in real_paragraphs:
        if "?" in paragraph or "!" in paragraph:  # our lower-case merge rule differs there
            continue
        assert ours.split_sentences(paragraph) == plain.tokenize(paragraph)
        compared += 1
    assert compared > 200


def test_last_whitespace_index_matches_nltk():
    rng = random.Random(0)
    alphabet = "ab.\u00a0" + string.whitespace
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 12)))
        expected = PunktSentenceTokenizer._get_last_whitespace_index(None, text)
        assert _PunktSplitter._get_last_whitespace_index(None, text) == expected, repr(text)


# ---- words --------------------------------------------------------------------------------


def test_quotes_keep_their_original_characters():
    assert tokenize_words('He said, "I can\'t go."') == [
        "He", "said", ",", '"', "I", "ca", "n't", "go", ".", '"']
    assert tokenize_words('"Hi"') == ['"', "Hi", '"']
    assert tokenize_words("``Hello,'' she said.") == ["``", "Hello", ",", "''", "she", "said", "."]
    assert tokenize_words("“Quoted,” she said ‘so’.") == [
        "“", "Quoted", ",", "”", "she", "said", "‘", "so", "’", "."]
    for odd in ["'''", '""', "\"'\"", "''``\"'", "a''b\"c``d"]:
        assert "".join(tokenize_words(odd)) == odd


def test_tokens_are_substrings_in_order_on_real_data(real_paragraphs):
    tokenizer = get_tokenizer()
    n_tokens = 0
    for paragraph in real_paragraphs:
        sentences = tokenizer.span_tokenize(paragraph)
        flat = [span for sentence in sentences for span in sentence]
        assert_spans_cover(paragraph, flat)
        tokens = tokenizer.tokenize(paragraph)
        assert tokens == [[paragraph[s:e] for s, e in sentence] for sentence in sentences]
        n_tokens += len(flat)
    assert n_tokens > 10_000


def test_words_match_nltk_where_nltk_keeps_the_text(real_paragraphs):
    """Same tokens as nltk's NLTKWordTokenizer.span_tokenize (its quote mapping included)."""
    nltk_words = NLTKWordTokenizer()
    for sentence in get_tokenizer().split_sentences("\n".join(real_paragraphs[:60])):
        expected = [sentence[s:e] for s, e in nltk_words.span_tokenize(sentence)]
        assert tokenize_words(sentence) == expected


def test_emoji_and_other_scripts():
    text = "I love 🍕 and 🇫🇷! 中文句子。Straße, naïve café—Ελληνικά и русский. 👍🏽"
    sentences = tokenize(text)
    assert sentences[0] == ["I", "love", "🍕", "and", "🇫🇷", "!"]
    flat = [token for sentence in sentences for token in sentence]
    assert "".join(flat) == "".join(text.split())
    assert "👍🏽" in flat and "русский" in flat
    assert_spans_cover(text, [span for s in get_tokenizer().span_tokenize(text) for span in s])


def test_empty_and_blank_input():
    for text in ["", " ", "\n", "\n\n \t\r\n", "\u00a0\u2028"]:
        assert tokenize(text) == []
        assert split_sentences(text) == []
        assert tokenize_words(text) == []


def test_long_input():
    text = "This is sentence number 1. " * 2000 + "And " + "word " * 20_000 + "end"
    sentences = tokenize(text)
    assert len(sentences) == 2001
    assert sentences[0] == ["This", "is", "sentence", "number", "1", "."]
    assert len(sentences[-1]) == 20_002
    assert len(tokenize_words("x" * 100_000)) == 1


def test_repair_keeps_every_character(caplog):
    """If a tokenizer quirk ever breaks the alignment, no character is lost."""
    tokenizer = get_tokenizer()
    sentence = "ab cd ef"
    spans = tokenizer._repair_spans(sentence, [(3, 5)], ["ab", "cd", "XX"])
    assert spans == [(0, 2), (3, 5), (6, 8)]
    assert "do not align" in caplog.text


# ---- the CLI ------------------------------------------------------------------------------


def test_build_punkt_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        build_punkt.main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert "--chars-per-source" in out and "--data-root" in out


def test_build_punkt_small_run_is_deterministic(data_root, tmp_path, capsys):
    args = ["--data-root", str(data_root), "--sources", "lm_corpus/wiki-valid.txt.gz",
            "--chars-per-source", "150000", "--min-ortho-count", "2"]
    assert build_punkt.main(args + ["--out", str(tmp_path / "a")]) == 0
    assert build_punkt.main(args + ["--out", str(tmp_path / "b")]) == 0
    for name in PUNKT_FILES:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert "wiki-valid.txt.gz" in (tmp_path / "a" / "README.md").read_text(encoding="utf-8")
    tokenizer = Tokenizer.from_directory(tmp_path / "a")
    assert len(tokenizer.split_sentences("It rained. We stayed in.")) == 2
    assert "examples:" in capsys.readouterr().out


def test_build_punkt_missing_source(tmp_path, capsys):
    code = build_punkt.main(["--data-root", str(tmp_path), "--out", str(tmp_path / "out")])
    assert code == 1
    assert "not found" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
