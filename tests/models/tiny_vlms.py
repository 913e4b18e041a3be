"""Tiny random-weight generative VLMs built offline from configs, saved with save_pretrained.

The tokenizer is a byte-level BPE trained here with `tokenizers` on a few sentences (no
download); the image processors and models come from transformers configs with hidden size 32
and one or two layers, so building and running one takes well under a second.
"""

from __future__ import annotations

from pathlib import Path

import torch

CORPUS = [
    "USER: What is shown in this image? Answer with the name of the object. ASSISTANT:",
    "T-shirt/top Trouser Pullover Dress Coat Sandal Shirt Sneaker Bag Ankle boot",
    "a cat a dog a truck an airplane a bird a ship a frog a horse",
    "Which clothing item is this? It is a photo of the thing you see.",
]
LLAVA_TEMPLATE = (
    "{% for message in messages %}{{ message['role'].upper() }}: "
    "{% for c in message['content'] %}{% if c['type'] == 'image' %}<image>\n{% else %}{{ c['text'] }}{% endif %}"
    "{% endfor %}\n{% endfor %}{% if add_generation_prompt %}ASSISTANT:{% endif %}"
)


def tiny_tokenizer(extra_special: list[str], vocab_size: int = 400):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<pad>", "<s>", "</s>", *extra_special],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 3, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")


def save_tiny_llava(folder: Path, chat_template: bool = True, seed: int = 0) -> Path:
    """A LLaVA (CLIP vision tower 32 px, 2 patches a side; Llama with 2 layers) in ``folder``."""
    from transformers import (CLIPImageProcessor, CLIPVisionConfig, LlamaConfig, LlavaConfig,
                              LlavaForConditionalGeneration, LlavaProcessor)

    tok = tiny_tokenizer(["<image>"])
    tok.image_token = "<image>"
    image_processor = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    processor = LlavaProcessor(image_processor=image_processor, tokenizer=tok, patch_size=16,
                               vision_feature_select_strategy="default", num_additional_image_tokens=1,
                               chat_template=LLAVA_TEMPLATE if chat_template else None)
    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                              image_size=32, patch_size=16, projection_dim=32)
    text = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                       num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
                       pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    config = LlavaConfig(vision_config=vision, text_config=text, image_token_id=tok.convert_tokens_to_ids("<image>"),
                         vision_feature_layer=-1, vision_feature_select_strategy="default")
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config).eval()
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


QWEN_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{% for c in message['content'] %}"
    "{% if c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif c['type'] == 'video' %}<|vision_start|><|video_pad|><|vision_end|>{% else %}{{ c['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def save_tiny_qwen2_vl(folder: Path, seed: int = 0) -> Path:
    """A Qwen2-VL (multimodal rotary positions; 28-56 px images and video frames, 14-px patches merged 2x2, two
    frames a temporal patch) in ``folder``; its chat template places an image or a video.

    Its chat template ends in a newline, so class names follow without a space.
    """
    from transformers import (Qwen2VLConfig, Qwen2VLForConditionalGeneration, Qwen2VLImageProcessor,
                              Qwen2VLProcessor, Qwen2VLVideoProcessor)

    tok = tiny_tokenizer(["<|vision_start|>", "<|image_pad|>", "<|vision_end|>", "<|video_pad|>", "<|im_start|>",
                          "<|im_end|>"])
    image_processor = Qwen2VLImageProcessor(min_pixels=28 * 28, max_pixels=56 * 56, patch_size=14, merge_size=2,
                                            temporal_patch_size=2)
    processor = Qwen2VLProcessor(image_processor=image_processor, tokenizer=tok,
                                 video_processor=Qwen2VLVideoProcessor(min_pixels=28 * 28, max_pixels=56 * 56, patch_size=14,
                                                                         merge_size=2, temporal_patch_size=2),
                                 chat_template=QWEN_TEMPLATE)
    ids = {t: tok.convert_tokens_to_ids(t) for t in ("<|vision_start|>", "<|image_pad|>", "<|vision_end|>", "<|video_pad|>")}
    special = dict(pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    config = Qwen2VLConfig(
        text_config=dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                         rope_parameters={"rope_type": "default", "mrope_section": [2, 3, 3], "rope_theta": 10000.0},
                         **special),
        vision_config=dict(depth=1, embed_dim=32, hidden_size=32, num_heads=2, mlp_ratio=2, patch_size=14,
                           spatial_merge_size=2, temporal_patch_size=2, in_channels=3),
        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"], vision_end_token_id=ids["<|vision_end|>"], **special)
    torch.manual_seed(seed)
    model = Qwen2VLForConditionalGeneration(config).eval()
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder
