"""Beyond accuracy: how easily a layer gives a property up (MDL), what it adds to the layer below
(conditional probing) and whether the model uses it (amnesic probing)."""
