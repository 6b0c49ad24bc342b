"""Syntax on nonsense: the Jabberwocky generator (seeded, a lexicon, inflection and trees kept, never
a real word), UUAS per arc length, and the control in a structural-probe run."""

import pytest

from probing.syntax.jabberwocky import (is_replaced, jabberwocky_tree, jabberwocky_trees, pseudo_word, real_words,
                                        replaced_share, split_ending)
from probing.syntax.trees import DependencyTree, read_ewt_trees, tree_distances, uuas_by_arc_length

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# President Bush on Tuesday nominated two individuals to replace retiring jurists on federal courts .
NOMINATED = DependencyTree(
    ("President", "Bush", "on", "Tuesday", "nominated", "two", "individuals", "to", "replace", "retiring", "jurists",
     "on", "federal", "courts", "quickly", "."),
    (1, 4, 3, 4, -1, 6, 4, 8, 4, 10, 8, 13, 13, 10, 4, 4),
    ("nmod:desc", "nsubj", "case", "obl", "root", "nummod", "obj", "mark", "advcl", "amod", "obj", "case", "amod",
     "nmod", "advmod", "punct"),
    ("PROPN", "PROPN", "ADP", "PROPN", "VERB", "NUM", "NOUN", "PART", "VERB", "VERB", "NOUN", "ADP", "ADJ", "NOUN",
     "ADV", "PUNCT"), "s1")


def test_content_words_become_pseudo_words_with_their_endings_and_the_tree_stays():
    fake = jabberwocky_tree(NOMINATED, 0, real_words([NOMINATED]))
    assert (fake.heads, fake.relations, fake.upos) == (NOMINATED.heads, NOMINATED.relations, NOMINATED.upos)
    changed = [i for i, (a, b) in enumerate(zip(NOMINATED.tokens, fake.tokens)) if a != b]
    assert changed == [4, 6, 8, 9, 10, 12, 13, 14]  # verbs, nouns, the adjective, the -ly adverb
    assert fake.tokens[:4] == NOMINATED.tokens[:4] and fake.tokens[5] == "two" and fake.tokens[-1] == "."
    assert fake.tokens[4].endswith("ed") and fake.tokens[9].endswith("ing") and fake.tokens[14].endswith("ly")
    assert fake.tokens[6].endswith("s") and fake.tokens[10].endswith("s") and fake.tokens[13].endswith("s")
    assert not any(fake.tokens[i].lower() in {t.lower() for t in NOMINATED.tokens} for i in changed)
    upper = DependencyTree(("Dogs", "bark"), (1, -1), ("nsubj", "root"), ("NOUN", "VERB"))
    assert jabberwocky_tree(upper, 0, frozenset()).tokens[0][0].isupper()  # capitals follow the original


def test_the_same_word_is_the_same_pseudo_word_everywhere_and_the_seed_changes_the_lexicon():
    a = DependencyTree(("courts", "rule"), (1, -1), ("nsubj", "root"), ("NOUN", "VERB"))
    b = DependencyTree(("the", "court", "ruled"), (1, 2, -1), ("det", "nsubj", "root"), ("DET", "NOUN", "VERB"))
    one = jabberwocky_trees([a, b], seed=0, avoid=frozenset())
    reversed_order = jabberwocky_trees([b, a], seed=0, avoid=frozenset())[::-1]
    assert one == reversed_order  # the lexicon does not depend on the order the sentences are read in
    assert one[0].tokens[0] == one[1].tokens[1] + "s"  # court / courts: one stem, its ending kept
    assert one[0].tokens[1] + "d" == one[1].tokens[2] or one[1].tokens[2].endswith("ed")
    assert jabberwocky_trees([a, b], seed=1, avoid=frozenset()) != one


def test_a_pseudo_word_is_never_a_real_word():
    first = pseudo_word("court", "NOUN", "", 0, frozenset())
    assert pseudo_word("court", "NOUN", "", 0, frozenset({first})) != first
    assert split_ending("class", "NOUN") == ("class", "") and split_ending("jurists", "NOUN") == ("jurist", "s")
    assert split_ending("retiring", "VERB") == ("retir", "ing") and split_ending("is", "VERB") == ("is", "")
    assert not is_replaced("not", "ADV") and not is_replaced("e-mail", "NOUN") and is_replaced("quickly", "ADV")


def test_on_ewt_test_a_quarter_to_a_third_of_the_tokens_change_and_none_is_an_ewt_word(data_root):
    trees = read_ewt_trees("test", data_root, limit=200)
    avoid = real_words(*(read_ewt_trees(s, data_root) for s in ("train", "dev", "test")))
    fake = jabberwocky_trees(trees, 0, avoid)
    assert 0.2 < replaced_share(trees) < 0.4
    new_words = {v.lower() for t, f in zip(trees, fake) for w, v in zip(t.tokens, f.tokens) if w != v}
    assert new_words and not new_words & avoid
    assert all(f.heads == t.heads for t, f in zip(trees, fake))


def test_uuas_by_arc_length_known_answers():
    gold = [tree_distances(NOMINATED.heads).astype(float)]
    assert set(uuas_by_arc_length(gold, [NOMINATED]).values()) == {1.0}
    chain = uuas_by_arc_length(None, [NOMINATED])  # the linear chain: every arc of length 1, none longer
    assert chain["1"] == 1.0 and chain["2"] == 0.0 and chain["5+"] == 0.0
    assert set(chain) == {"1", "2", "3-4", "5+"}


def test_a_structural_run_scores_its_probes_on_nonsense_too(data_root, tmp_path):
    from probing.syntax.structural import StructuralResult, SyntaxConfig, run_structural

    config = SyntaxConfig(ranks=(4,), max_epochs=1, random_bilm=False)
    result = run_structural(data_root / "fixtures" / "bilm_tf", data_root=data_root, cache_dir=tmp_path, limit=12,
                            config=config)
    assert [s.layer for s in result.nonsense] == [s.layer for s in result.model] == [0, 1, 2]
    assert 0.2 < result.nonsense_replaced < 0.45 and result.linear_chain_by_arc_length["1"] == 1.0
    assert all(s.uuas_by_arc_length and set(s.uuas_by_arc_length) <= {"1", "2", "3-4", "5+"}
               for s in result.model + result.nonsense)
    assert any(a.uuas != b.uuas for a, b in zip(result.model, result.nonsense))  # other vectors, other trees
    assert "Syntax on nonsense" in result.table()
    assert StructuralResult.from_dict(result.to_dict()) == result
    plain = run_structural(data_root / "fixtures" / "bilm_tf", data_root=data_root, cache_dir=tmp_path, limit=12,
                           config=SyntaxConfig(ranks=(4,), max_epochs=1, random_bilm=False, jabberwocky=False))
    assert plain.nonsense == () and [s.uuas for s in plain.model] == [s.uuas for s in result.model]
