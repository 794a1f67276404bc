#!/usr/bin/python3
"""Write the golden files of model/clip's tests: a random-weight CLIP image
tower, small images, their preprocessed pixels and their embeddings.

Usage (Debian's python3 with python3-torch, python3-numpy, python3-pil):
    /usr/bin/python3 scripts/clip_golden.py model/clip/testdata

The model is written here from the architecture of CLIP's vision tower as
Hugging Face's CLIPVisionModelWithProjection computes it (transformers is not
needed): a patch convolution without bias, a class embedding and learned
position embeddings, pre_layrnorm, pre-LayerNorm encoder blocks (self-
attention with biased q, k, v and out projections, scale 1/sqrt(head_dim),
non-causal; an MLP fc1 -> quick_gelu -> fc2), post_layernorm of the class
token and visual_projection without bias. The configuration is small (hidden
64, 2 layers, 4 heads, patch 32, image 224, projection 32) so the files stay
small; the patch embedding is stored as F16 and every other tensor as F32.

Preprocessing follows CLIPImageProcessor: an image that is not RGB is
composited over white (convert_rgb), the shortest side is resized to 224
with PIL's BICUBIC (reducing_gap=None), the centre 224x224 is cropped with
top = (h - 224) // 2, left = (w - 224) // 2, then x = float32(float64(v) *
(1/255)) and (x - mean) / std in float32.

Files written into OUT:
    config.json, model.safetensors   the checkpoint (names as Hugging Face's
                                     CLIPModel; two text tensors included,
                                     which a vision loader must ignore)
    imgN.png                         the input images (N = 0 … 3)
    imgN_crop.png                    PIL's resized and cropped 8-bit pixels
    golden.safetensors               pixel_lut [3, 256] f32: normalised value
                                     of each channel and byte; embeds [N, 32]
                                     f32: the image embeddings of imgN.png
"""

import json
import math
import os
import struct
import sys

import numpy as np
import torch
from PIL import Image, ImageDraw

MEAN = (0.48145466, 0.4578275, 0.40821073)
STD = (0.26862954, 0.26130258, 0.27577711)

CFG = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
           patch_size=32, image_size=224, projection_dim=32, layer_norm_eps=1e-5, hidden_act="quick_gelu",
           num_channels=3)


def write_safetensors(path, tensors):
    """tensors: list of (name, numpy array); dtypes float32/float16."""
    names = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16"}
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, a in tensors:
        a = np.ascontiguousarray(a)
        b = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": names[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def random_weights(g):
    D, F, P, S, E = (CFG["hidden_size"], CFG["intermediate_size"], CFG["patch_size"], CFG["image_size"],
                     CFG["projection_dim"])
    T = (S // P) ** 2 + 1

    def rnd(*shape, std=0.02, mean=0.0):
        return (torch.randn(*shape, generator=g) * std + mean).float()

    w = {}
    w["vision_model.embeddings.patch_embedding.weight"] = rnd(D, 3, P, P, std=0.05).half()
    w["vision_model.embeddings.class_embedding"] = rnd(D, std=0.5)
    w["vision_model.embeddings.position_embedding.weight"] = rnd(T, D, std=0.5)
    w["vision_model.pre_layrnorm.weight"] = rnd(D, std=0.1, mean=1.0)
    w["vision_model.pre_layrnorm.bias"] = rnd(D, std=0.1)
    for l in range(CFG["num_hidden_layers"]):
        p = "vision_model.encoder.layers.%d." % l
        for n in ("q", "k", "v", "out"):
            w[p + "self_attn.%s_proj.weight" % n] = rnd(D, D, std=0.15)
            w[p + "self_attn.%s_proj.bias" % n] = rnd(D, std=0.1)
        for n in ("layer_norm1", "layer_norm2"):
            w[p + n + ".weight"] = rnd(D, std=0.1, mean=1.0)
            w[p + n + ".bias"] = rnd(D, std=0.1)
        w[p + "mlp.fc1.weight"] = rnd(F, D, std=0.15)
        w[p + "mlp.fc1.bias"] = rnd(F, std=0.1)
        w[p + "mlp.fc2.weight"] = rnd(D, F, std=0.1)
        w[p + "mlp.fc2.bias"] = rnd(D, std=0.1)
    w["vision_model.post_layernorm.weight"] = rnd(D, std=0.1, mean=1.0)
    w["vision_model.post_layernorm.bias"] = rnd(D, std=0.1)
    w["visual_projection.weight"] = rnd(E, D, std=0.15)
    # Text-tower tensors a CLIPModel file also holds; the vision loader ignores them.
    w["text_model.embeddings.token_embedding.weight"] = rnd(8, D)
    w["logit_scale"] = torch.tensor(math.log(1 / 0.07)).float()
    return w


def image_tower(pix, w):
    """pix [B, 3, S, S] float32 -> embeddings [B, E], as HF's vision tower."""
    D, H, P = CFG["hidden_size"], CFG["num_attention_heads"], CFG["patch_size"]
    eps, dh = CFG["layer_norm_eps"], CFG["hidden_size"] // CFG["num_attention_heads"]
    B = pix.shape[0]
    f = {k: v.float() for k, v in w.items()}
    x = torch.nn.functional.conv2d(pix, f["vision_model.embeddings.patch_embedding.weight"], stride=P)
    x = x.flatten(2).transpose(1, 2)  # [B, g*g, D]
    cls = f["vision_model.embeddings.class_embedding"].expand(B, 1, D)
    x = torch.cat([cls, x], dim=1) + f["vision_model.embeddings.position_embedding.weight"][None]
    ln = lambda t, n: torch.nn.functional.layer_norm(t, (D,), f[n + ".weight"], f[n + ".bias"], eps)
    lin = lambda t, n: torch.nn.functional.linear(t, f[n + ".weight"], f.get(n + ".bias"))
    x = ln(x, "vision_model.pre_layrnorm")
    T = x.shape[1]
    for l in range(CFG["num_hidden_layers"]):
        p = "vision_model.encoder.layers.%d." % l
        h = ln(x, p + "layer_norm1")
        heads = lambda t: t.reshape(B, T, H, dh).transpose(1, 2)
        q = heads(lin(h, p + "self_attn.q_proj") * dh ** -0.5)
        k = heads(lin(h, p + "self_attn.k_proj"))
        v = heads(lin(h, p + "self_attn.v_proj"))
        a = torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v
        x = x + lin(a.transpose(1, 2).reshape(B, T, D), p + "self_attn.out_proj")
        h = lin(ln(x, p + "layer_norm2"), p + "mlp.fc1")
        h = h * torch.sigmoid(1.702 * h)
        x = x + lin(h, p + "mlp.fc2")
    pooled = ln(x[:, 0], "vision_model.post_layernorm")
    return lin(pooled, "visual_projection")


def convert_rgb(im):
    if im.mode == "RGB":
        return im
    rgba = im.convert("RGBA")
    bg = Image.new("RGBA", rgba.size, (255, 255, 255))
    return Image.alpha_composite(bg, rgba).convert("RGB")


def resize_crop(im, size=224):
    """The 8-bit pixels after CLIPImageProcessor's resize and centre crop."""
    im = convert_rgb(im)
    w, h = im.size
    short, long = (w, h) if w <= h else (h, w)
    new_long = int(size * long / short)
    nw, nh = (size, new_long) if w <= h else (new_long, size)
    im = im.resize((nw, nh), resample=Image.BICUBIC, reducing_gap=None)
    a = np.array(im)
    top, left = (nh - size) // 2, (nw - size) // 2
    return a[top:top + size, left:left + size]


def normalise(a):
    """uint8 [..., 3] -> float32 [..., 3] as CLIPImageProcessor rescales and normalises."""
    x = (a.astype(np.float64) * (1 / 255)).astype(np.float32)
    return (x - np.array(MEAN, dtype=np.float32)) / np.array(STD, dtype=np.float32)


def make_images():
    """Four small images: a landscape RGB one (downscaled), a portrait RGBA
    one with partial transparency (upscaled), a tall RGB one (downscaled,
    cropped vertically), a grayscale one 224 wide (no resize: only the
    crop)."""
    ims = []
    im = Image.new("RGB", (320, 200))
    d = ImageDraw.Draw(im)
    for x in range(320):
        d.line([(x, 0), (x, 199)], fill=(x * 255 // 319, 80, 255 - x * 255 // 319))
    d.ellipse([40, 30, 150, 170], fill=(250, 240, 20))
    d.rectangle([200, 60, 290, 120], fill=(10, 10, 10))
    d.text((170, 150), "turnwise", fill=(255, 255, 255))
    ims.append(im)

    im = Image.new("RGBA", (90, 130), (0, 0, 0, 0))
    d = ImageDraw.Draw(im)
    for y in range(130):
        d.line([(0, y), (89, y)], fill=(200, y * 2 % 256, 40, y * 255 // 129))
    d.rectangle([10, 20, 50, 60], fill=(0, 120, 255, 255))
    d.ellipse([40, 70, 85, 125], fill=(255, 0, 0, 128))
    ims.append(im)

    im = Image.new("RGB", (256, 600), (255, 255, 255))
    d = ImageDraw.Draw(im)
    for i in range(0, 600, 40):
        d.rectangle([16, i + 5, 240, i + 30], fill=((i * 7) % 256, 100 + i % 100, 200))
        d.line([(0, i), (255, i + 20)], fill=(0, 0, 0), width=3)
    ims.append(im)

    im = Image.new("L", (224, 360), 30)
    d = ImageDraw.Draw(im)
    for i in range(0, 360, 24):
        d.rectangle([i % 200, i, i % 200 + 24, i + 12], fill=(i * 5) % 256)
    ims.append(im)
    return ims


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    g = torch.Generator().manual_seed(17)
    w = random_weights(g)
    cfg = {"architectures": ["CLIPModel"], "model_type": "clip", "projection_dim": CFG["projection_dim"],
           "vision_config": dict(CFG, model_type="clip_vision_model")}
    with open(os.path.join(out, "config.json"), "w") as fh:
        json.dump(cfg, fh, indent=2, sort_keys=True)
        fh.write("\n")
    write_safetensors(os.path.join(out, "model.safetensors"), [(k, v.numpy()) for k, v in w.items()])

    pix = []
    for i, im in enumerate(make_images()):
        im.save(os.path.join(out, "img%d.png" % i), optimize=True)
        im = Image.open(os.path.join(out, "img%d.png" % i))
        crop = resize_crop(im)
        Image.fromarray(crop).save(os.path.join(out, "img%d_crop.png" % i), optimize=True)
        pix.append(normalise(crop).transpose(2, 0, 1))
    lut = normalise(np.repeat(np.arange(256, dtype=np.uint8)[:, None], 3, axis=1)).T  # [3, 256]
    with torch.no_grad():
        emb = image_tower(torch.from_numpy(np.stack(pix)), w).numpy()
    write_safetensors(os.path.join(out, "golden.safetensors"),
                      [("pixel_lut", np.ascontiguousarray(lut)), ("embeds", emb.astype(np.float32))])
    print("embeddings", emb.shape, "norms", np.linalg.norm(emb, axis=1))


if __name__ == "__main__":
    main()
