"""The bytes of one block in cgn-kvcached, and the page access into a layer's paged KV cache.

A block (block_tokens tokens) is stored as, for each layer in the order vLLM registered the
layers (register_kv_caches), the layer's K page of that block followed by its V page:

    block = K[layer 0] | V[layer 0] | K[layer 1] | V[layer 1] | ... | K[layer L-1] | V[layer L-1]

each page being the layer's bytes for that block exactly as they sit in the engine's cache
(block_tokens x kv_heads x head_dim elements of the KV dtype for the flash-attention layout), so
a block is 2 x L x page_bytes bytes. Two engines exchange blocks only within one namespace (same
model, KV dtype, TP rank and size, block size), so the page layout is the same on both sides.

A layer is either
  - a plain writable buffer (bytearray, memoryview, array.array, mmap) of 2 x num_blocks pages:
    the K pages of blocks 0..num_blocks-1, then their V pages (the flash-attention tensor
    (2, num_blocks, block_tokens, kv_heads, head_dim), contiguous); or
  - a torch tensor shaped (2, num_blocks, ...), copied through host memory (not exercised by the
    tests here: there is no torch and no GPU on the build machines).
"""

from __future__ import annotations


class LayoutError(ValueError):
    pass


class BufferLayer:
    """One layer's K and V pages in a plain buffer: [K pages of all blocks][V pages of all blocks]."""

    def __init__(self, buf, num_blocks: int):
        if num_blocks <= 0:
            raise LayoutError(f"num_blocks {num_blocks} is not positive")
        view = memoryview(buf)
        if view.readonly:
            raise LayoutError("a layer's KV buffer must be writable")
        view = view.cast("B") if view.format != "B" or view.ndim != 1 else view
        if len(view) % (2 * num_blocks) != 0 or len(view) == 0:
            raise LayoutError(f"a layer buffer of {len(view)} bytes is not 2 x {num_blocks} equal pages")
        self._view = view
        self.num_blocks = num_blocks
        self.page_bytes = len(view) // (2 * num_blocks)

    def _span(self, kv: int, block_id: int) -> slice:
        if not 0 <= block_id < self.num_blocks:
            raise LayoutError(f"block id {block_id} is outside 0..{self.num_blocks - 1}")
        start = (kv * self.num_blocks + block_id) * self.page_bytes
        return slice(start, start + self.page_bytes)

    def read_page(self, kv: int, block_id: int) -> memoryview:
        return self._view[self._span(kv, block_id)]

    def write_page(self, kv: int, block_id: int, data) -> None:
        self._view[self._span(kv, block_id)] = data


class TorchLayer:  # pragma: no cover - needs torch
    """One layer's KV tensor shaped (2, num_blocks, ...), copied through host memory."""

    def __init__(self, tensor, num_blocks: int):
        if tensor.dim() < 2 or tensor.shape[0] != 2 or tensor.shape[1] != num_blocks:
            raise LayoutError(f"a KV tensor of shape {tuple(tensor.shape)} is not (2, {num_blocks}, ...)")
        self._t = tensor
        self.num_blocks = num_blocks
        self.page_bytes = tensor[0, 0].numel() * tensor.element_size()

    def read_page(self, kv: int, block_id: int) -> memoryview:
        import torch

        page = self._t[kv, block_id].contiguous().cpu().view(torch.uint8)
        return memoryview(page.numpy().tobytes())

    def write_page(self, kv: int, block_id: int, data) -> None:
        import torch

        dst = self._t[kv, block_id]
        src = torch.frombuffer(bytearray(data), dtype=torch.uint8).view(dst.dtype).view(dst.shape)
        dst.copy_(src.to(dst.device, non_blocking=False))


def make_layer(obj, num_blocks: int):
    if type(obj).__module__.startswith("torch"):
        return TorchLayer(obj, num_blocks)
    return BufferLayer(obj, num_blocks)


class BlockLayout:
    """The registered layers, in order, and the block bytes they make."""

    def __init__(self, layers: dict, num_blocks: int):
        if not layers:
            raise LayoutError("no KV cache layers were registered")
        self.num_blocks = num_blocks
        self.names = list(layers)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.layers = [make_layer(layers[name], num_blocks) for name in self.names]
        sizes = {layer.page_bytes for layer in self.layers}
        if len(sizes) != 1:
            raise LayoutError(f"the layers' pages differ in size ({sorted(sizes)}); one size is needed")
        self.page_bytes = sizes.pop()
        self.block_bytes = 2 * len(self.layers) * self.page_bytes

    def accessor(self, kv_layer, layer_index: int):
        """The page access of the cache vLLM hands save_kv_layer (None: the registered one)."""
        if kv_layer is None:
            return self.layers[layer_index]
        layer = make_layer(kv_layer, self.num_blocks)
        if layer.page_bytes != self.page_bytes:
            raise LayoutError(f"{layer.page_bytes}-byte pages; the registered layers have {self.page_bytes}")
        return layer

    def copy_layer_out(self, layer, block_id: int, block: bytearray, layer_index: int) -> None:
        """Copies one layer's K and V pages of block_id into its slot of a staged block."""
        base = 2 * layer_index * self.page_bytes
        block[base:base + self.page_bytes] = layer.read_page(0, block_id)
        block[base + self.page_bytes:base + 2 * self.page_bytes] = layer.read_page(1, block_id)

    def scatter(self, data, block_id: int) -> None:
        """Writes a whole block's bytes into every layer's K and V pages of block_id."""
        view = memoryview(data).cast("B")
        if len(view) != self.block_bytes:
            raise LayoutError(f"a block of {len(view)} bytes; this cache's blocks are {self.block_bytes}")
        p = self.page_bytes
        for i, layer in enumerate(self.layers):
            layer.write_page(0, block_id, view[2 * i * p:(2 * i + 1) * p])
            layer.write_page(1, block_id, view[(2 * i + 1) * p:(2 * i + 2) * p])
