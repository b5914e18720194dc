"""Deep-learning workloads (SPEC §5): PyTorch training of the paper's CNNs and RNNs on CPU.

Importing this package (which needs torch) registers alexnet, vgg16, resnet50, squeezenet,
inception, lstm and transformer.
"""

from buddylib.workloads.dl import cnn, lm  # noqa: F401
