"""``croissant.json`` of the sharded distribution: Croissant 1.0 with the Responsible-AI (RAI) fields.

The shards and ``pairs.csv`` are FileObjects (with their sha256), the videos,
masks and dictionaries inside the shards are FileSets, and the RecordSet
``pairs`` reads ``pairs.csv``. Validated with mlcroissant in the tests.
"""

from __future__ import annotations

from persistbench import __version__
from persistbench.io.files import sha256_file
from persistbench.suites.persistbench.layout import DistributionLayout

CONTEXT = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "sc": "https://schema.org/",
    "cr": "http://mlcommons.org/croissant/",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "dct": "http://purl.org/dc/terms/",
    "equivalentProperty": "cr:equivalentProperty",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract",
    "field": "cr:field",
    "fileProperty": "cr:fileProperty",
    "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "parentField": "cr:parentField",
    "path": "cr:path",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "samplingRate": "cr:samplingRate",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
}

RAI = {
    "rai:dataCollection": "Equirectangular 360-degree videos published on YouTube, listed by recipe (video id, time "
    "range, object masks as COCO RLE). Each case is rendered by persistbench download: the video is fetched for the "
    "recipe's time range only and reprojected into an input view (which looks away from the object and back) and a "
    "target view (which keeps the object centred), with cameras and visibility computed from the geometry.",
    "rai:dataCollectionType": "Secondary data: frames reprojected from public videos; no new recording.",
    "rai:dataPreprocessingProtocol": "Pinhole reprojection of the equirectangular frames (bilinear colour, nearest "
    "masks); views encoded as H.264 MP4 for distribution (settings in pack.json); masks kept lossless as PNG.",
    "rai:dataAnnotationProtocol": "Object masks come with the recipes (COCO RLE over the panorama) and are "
    "reprojected with the frames; visibility is the fraction of the object's solid angle inside the input view.",
    "rai:machineAnnotationTools": "persistbench " + __version__ + " (reprojection, visibility).",
    "rai:dataUseCases": "Evaluating whether video and 4D models keep track of where an object is, how it moves and "
    "what it looks like while it is outside the input view. Not for training models that identify people.",
    "rai:dataLimitations": "Frames derive from YouTube uploads, which can disappear or change; scenes, objects and "
    "camera motions are those of public 360-degree footage and do not cover all environments. H.264 encoding loses "
    "some detail; scores on these shards and on locally reconstructed frames can differ slightly.",
    "rai:dataBiases": "The videos over-represent places and activities popular with 360-degree creators (travel, "
    "outdoor and urban scenes); object categories follow the recipe authors' choices.",
    "rai:personalSensitiveInformation": "Public footage can show people, faces and licence plates incidentally; no "
    "identities are annotated. Rights in the footage remain with its owners.",
    "rai:dataSocialImpact": "Better measurement of visual memory in video models; misuse for tracking people is "
    "possible in principle and out of scope.",
}

_PAIR_FILES = [
    ("views", "video/mp4", "*/*/*/*/video.mp4", "H.264 MP4 of the input (view_0) and target (center) views."),
    ("masks", "image/png", "*/*/*/*/masks/*.png", "Object masks per frame, uint8 0/255."),
    (
        "dictionaries",
        "application/octet-stream",
        "*/*/*/*.npy",
        "Pickled dictionaries in the public format: visibility, yaw/pitch; read them with persistbench.load_npy.",
    ),
    (
        "cameras",
        "application/octet-stream",
        "*/*/*/*/camera_params.npy",
        "Per-view cameras {cam_poses: (T,4,4) camera-to-world, cam_intrinsic: (3,3)}.",
    ),
]


def describe(dist: DistributionLayout, checksums: dict, index: dict, date: str | None = None) -> dict:
    """The Croissant document of a distribution whose shards, samples and ``pairs.csv`` are written.

    ``date`` (ISO ``YYYY-MM-DD``) becomes ``datePublished``; without it the field is left out, so
    that packing the same data twice gives the same bytes.
    """
    shards = sorted(name for name in checksums if "/" not in name)
    distribution = [
        {
            "@type": "cr:FileObject",
            "@id": f"shard/{name}",
            "name": name,
            "contentUrl": f"shards/{name}",
            "encodingFormat": "application/x-tar",
            "sha256": checksums[name]["sha256"],
            "contentSize": f"{checksums[name]['bytes']} B",
        }
        for name in shards
    ]
    distribution.append(
        {
            "@type": "cr:FileObject",
            "@id": "pairs.csv",
            "name": "pairs.csv",
            "contentUrl": "pairs.csv",
            "encodingFormat": "text/csv",
            "sha256": sha256_file(dist.pairs_csv),
        }
    )
    for name, fmt, pattern, text in _PAIR_FILES:
        distribution.append(
            {
                "@type": "cr:FileSet",
                "@id": name,
                "name": name,
                "description": text,
                "containedIn": [{"@id": f"shard/{s}"} for s in shards],
                "encodingFormat": fmt,
                "includes": pattern,
            }
        )
    columns = [
        ("pair_id", "sc:Text", "The case id: <Category>_<video id>_<clip>_obj_<object id>."),
        ("shard", "sc:Text", "The shard holding the pair."),
        ("subset", "sc:Text", "dynamic (the object moves) or static."),
        ("n_frames", "sc:Integer", "Frames per view."),
    ]
    fields = [
        {
            "@type": "cr:Field",
            "@id": f"pairs/{col}",
            "name": col,
            "description": text,
            "dataType": dtype,
            "source": {"fileObject": {"@id": "pairs.csv"}, "extract": {"column": col}},
        }
        for col, dtype, text in columns
    ]
    return {
        "@context": CONTEXT,
        "@type": "sc:Dataset",
        "name": "persistbench",
        "description": f"Visual-memory benchmark pairs (input view, target view, masks, cameras, visibility): "
        f"{len(index)} pairs in {len(shards)} tar shards.",
        "conformsTo": ["http://mlcommons.org/croissant/1.0", "http://mlcommons.org/croissant/RAI/1.0"],
        "url": "https://github.com/persistbench/persistbench",
        "license": "https://opensource.org/licenses/MIT",
        "version": __version__,
        **({"datePublished": date} if date else {}),
        "citeAs": "persistbench: a toolkit for benchmarking visual memory in video and 4D models",
        "creator": {"@type": "sc:Organization", "name": "persistbench developers"},
        "keywords": ["video", "360-degree video", "visual memory", "novel view synthesis", "benchmark"],
        **RAI,
        "distribution": distribution,
        "recordSet": [
            {
                "@type": "cr:RecordSet",
                "@id": "pairs",
                "name": "pairs",
                "key": {"@id": "pairs/pair_id"},
                "description": "One record per pair, from pairs.csv.",
                "field": fields,
            }
        ],
    }
