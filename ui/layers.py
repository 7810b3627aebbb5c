"""The map layers the pages share, sized in pixels: positions are `[lon, lat]` on each row,
colours RGBA lists (or a row's column name)."""

from __future__ import annotations

from typing import Any

import pydeck as pdk

PIXELS = pdk.types.String("pixels")
Color = list[int] | str


def dots(id: str, data: Any, radius: int | str, color: Color, **extra: Any) -> pdk.Layer:
    """Filled circles."""
    return pdk.Layer(
        "ScatterplotLayer",
        id=id,
        data=data,
        get_position="[lon, lat]",
        get_radius=radius,
        radius_units=PIXELS,
        get_fill_color=color,
        **extra,
    )


def rings(id: str, data: Any, radius: int, color: Color, width: int) -> pdk.Layer:
    """Unfilled circles: a marker around what another layer draws."""
    return pdk.Layer(
        "ScatterplotLayer",
        id=id,
        data=data,
        get_position="[lon, lat]",
        get_radius=radius,
        radius_units=PIXELS,
        filled=False,
        stroked=True,
        get_line_color=color,
        get_line_width=width,
        line_width_units=PIXELS,
    )


def labels(
    id: str, data: Any, text: str, size: int, color: Color, offset: list[int], **extra: Any
) -> pdk.Layer:
    """Text from column `text`, left-aligned `offset` pixels from each point."""
    return pdk.Layer(
        "TextLayer",
        id=id,
        data=data,
        get_position="[lon, lat]",
        get_text=text,
        get_size=size,
        get_color=color,
        get_text_anchor=pdk.types.String("start"),
        get_pixel_offset=offset,
        **extra,
    )


def paths(id: str, data: Any, color: Color, width: int, **extra: Any) -> pdk.Layer:
    """Lines along each row's `path` of [lon, lat] points."""
    return pdk.Layer(
        "PathLayer",
        id=id,
        data=data,
        get_path="path",
        get_color=color,
        get_width=width,
        width_units=PIXELS,
        **extra,
    )
