"""TUPE's [CLS] reset (Ke, He, Liu, ICLR 2021, Eq. 9 and App. B) on a scheme without TUPE's own
table (model.untie_cls), as engine/src/schemes/cls_reset.cpp: learned theta1 per head on
[CLS]'s row ([CLS] -> others) and theta2 on its column (others -> [CLS]), the row winning at
[0, 0]. Shapes: cls_theta (2, H) -> (H, T, T).
"""

import torch
from torch import nn

from .scheme_module import SchemeModule, add_bias


class ClsReset(SchemeModule):
    def __init__(self, owner):
        owner.cls_theta = nn.Parameter(torch.zeros(2, owner.config.num_attention_heads))
        self.owner = owner

    def contribute(self, positions, dtype, terms):
        theta = self.owner.cls_theta
        t, h = positions.shape[0], theta.shape[1]
        zeros = torch.zeros(h, t - 1, t - 1, dtype=theta.dtype, device=theta.device)
        body = torch.cat([theta[1].view(h, 1, 1).expand(h, t - 1, 1), zeros], 2)  # (H, T-1, T)
        cls = torch.cat([theta[0].view(h, 1, 1).expand(h, 1, t), body], 1)  # (H, T, T)
        for layer in terms.layers:
            add_bias(layer, cls)
