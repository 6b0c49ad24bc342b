"""Write the TF Hub ELMo module that tests/test_tfhub.py reads: bilm-tf's test biLM (the data root's
``fixtures/bilm_tf``) saved by TensorFlow as a TF1 SavedModel, with the variable names of the biLM
graph inside TF Hub's ELMo modules (``bilm/char_embed`` with its padding row 0, ``bilm/CNN/...``,
``bilm/RNN_d/RNN/MultiRNNCell/Cell<l>/rnn/lstm_cell/{kernel,bias,projection/kernel}``), the mixing
variables ``aggregation/weights`` and ``aggregation/scaling``, and a non-trainable state variable
as bilm-tf's stateful graph keeps.

Needs TensorFlow (any 2.x; not a dependency of the project: the converter reads the files without
it)::

    python -m venv /tmp/tf && /tmp/tf/bin/pip install tensorflow-cpu h5py
    /tmp/tf/bin/python scripts/write_tfhub_fixture.py [--data-root ../shared] [--out tests/fixtures/tfhub_elmo]
"""

import argparse
import shutil
from pathlib import Path

import h5py
import numpy as np
import tensorflow as tf


def graph_name(name: str) -> str:
    """A bilm-tf hdf5 dataset name -> the variable's name in the module's graph."""
    for old, new in (("/LSTMCell/W_0", "/rnn/lstm_cell/kernel"), ("/LSTMCell/B", "/rnn/lstm_cell/bias"),
                     ("/LSTMCell/W_P_0", "/rnn/lstm_cell/projection/kernel")):
        name = name.replace(old, new)
    return "bilm/" + name


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default=Path(__file__).resolve().parents[2] / "shared", type=Path)
    parser.add_argument("--out", default=Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "tfhub_elmo",
                        type=Path)
    args = parser.parse_args()
    weights = {}
    with h5py.File(args.data_root / "fixtures" / "bilm_tf" / "lm_weights.hdf5", "r") as f:
        f.visititems(lambda name, item: weights.update({name: item[...]}) if isinstance(item, h5py.Dataset) else None)
    char_embed = weights.pop("char_embed")
    values = {"bilm/char_embed": np.concatenate([np.zeros((1, char_embed.shape[1]), np.float32), char_embed])}
    values.update({graph_name(name): value for name, value in weights.items()})
    values["aggregation/weights"] = np.array([0.1, -0.2, 0.3], np.float32)
    values["aggregation/scaling"] = np.array(1.5, np.float32)
    if args.out.exists():
        shutil.rmtree(args.out)
    graph = tf.Graph()
    with graph.as_default():
        variables = {name: tf.compat.v1.get_variable(name, shape=value.shape, initializer=tf.zeros_initializer())
                     for name, value in sorted(values.items())}  # values loaded below: a small graph file
        tf.compat.v1.get_variable("bilm/RNN_0/RNN/MultiRNNCell/Cell0/state", shape=(4, 16),
                                  initializer=tf.zeros_initializer(), trainable=False)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            for name, variable in variables.items():
                variable.load(values[name].astype(np.float32), session)
            builder = tf.compat.v1.saved_model.Builder(str(args.out))
            builder.add_meta_graph_and_variables(session, ["serve"])
            builder.save()
    print(f"wrote {args.out} ({len(values) + 1} variables)")


if __name__ == "__main__":
    main()
