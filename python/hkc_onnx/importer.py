# SPDX-License-Identifier: Apache-2.0
"""The importer: the graph walk (core.py) with the op_<OpType> methods of every pattern family."""
from .activations import Activations
from .attention import Attention
from .core import Core
from .elementwise import Elementwise
from .embeddings import Embeddings
from .layout import Layout
from .linear import Linear
from .masks import Masks
from .norms import Norms
from .rope import Rope


class Importer(Linear, Attention, Rope, Masks, Embeddings, Norms, Activations, Elementwise, Layout, Core):
    pass
