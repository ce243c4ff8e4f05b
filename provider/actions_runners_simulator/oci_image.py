"""The listener image's OCI image layout (tools/listener-image/build.sh), read with the standard library only: its
manifest, its config (entrypoint, cmd, env, user, working directory, labels) and its layers; the command and
environment a container of it runs with, by Kubernetes' rules; its root filesystem unpacked.

    image = read_image(layout)                      # the layout's one image, or read_image(layout, "0.2.0")
    argv = image.config.argv(command=None, args=None)  # a pod's command/args over the image's Entrypoint/Cmd
    env = image.config.environment(pod_env)         # the image's Env, then the pod's (the pod's wins)
    image.unpack(rootfs)                            # its layers, in order, into an empty folder
    popen_args = image.unshare_argv(rootfs, argv, env)  # to run it there, as the image's user (util-linux unshare)

`python -m actions_runners_simulator.oci_image LAYOUT [--ref REF] [--json | --summary | --digest-size]` prints
the same from a shell.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import posixpath
import shutil
import sys
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
REF_NAME = "org.opencontainers.image.ref.name"


@dataclass(frozen=True)
class ImageConfig:
    """The image config's ``config`` part (OCI image spec, config.md), as a runtime reads it."""

    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)  # in the image's order; a later duplicate wins
    user: str = ""  # "uid", "uid:gid", "name" or "" (root)
    working_dir: str = "/"
    labels: dict[str, str] = field(default_factory=dict)
    stop_signal: str = "SIGTERM"

    def argv(self, command: Sequence[str] | None = None, args: Sequence[str] | None = None) -> list[str]:
        """What a container runs, by Kubernetes' rule: a pod's ``command`` replaces the Entrypoint and drops the
        Cmd; its ``args`` replace the Cmd. argv[0] is looked up in PATH (``which``) when it holds no '/'."""
        if command:
            return [*command, *(args or ())]
        return [*self.entrypoint, *(args if args else self.cmd)]

    def environment(self, overrides: Mapping[str, str] = {}) -> dict[str, str]:
        """The image's Env, then a container's own variables over it (as a runtime merges them)."""
        return {**self.env, **overrides}

    def uid_gid(self) -> tuple[int, int]:
        """The numeric user and group (this image names its user by number, which runAsNonRoot can check)."""
        user, _, group = self.user.partition(":")
        if not user:
            return 0, 0
        if not user.isdigit() or (group and not group.isdigit()):
            raise ValueError(f"the image's user {self.user!r} is a name: read /etc/passwd of its root filesystem")
        return int(user), int(group or user)

    def which(self, name: str, rootfs: Path | None = None, env: Mapping[str, str] | None = None) -> str:
        """The path, inside the image, that a command name resolves to on the image's PATH (or env's); with
        ``rootfs`` (an unpacked root filesystem) the first that exists there, else the first PATH entry."""
        if "/" in name:
            return name
        path = (env if env is not None else self.env).get("PATH", "/usr/local/bin:/usr/bin:/bin")
        folders = [folder for folder in path.split(":") if folder]
        for folder in folders:
            candidate = posixpath.join(folder, name)
            if rootfs is None or (rootfs / candidate.lstrip("/")).exists():
                return candidate
        raise FileNotFoundError(f"{name} is on none of the image's PATH ({path})")


@dataclass(frozen=True)
class Layer:
    digest: str
    size: int  # compressed, as stored
    media_type: str
    diff_id: str  # the uncompressed tar's digest (the config's rootfs.diff_ids)


@dataclass(frozen=True)
class Image:
    layout: Path
    ref: str  # the index's ref name (the tag) or ""
    digest: str  # the manifest's: the image's digest, as a registry names it
    manifest_size: int
    config_digest: str
    config_size: int
    config: ImageConfig
    os: str
    architecture: str
    created: str
    layers: tuple[Layer, ...]

    @property
    def size(self) -> int:
        """The bytes a registry stores for it: manifest, config and compressed layers."""
        return self.manifest_size + self.config_size + sum(layer.size for layer in self.layers)

    def blob(self, digest: str) -> Path:
        algorithm, _, hexdigest = digest.partition(":")
        return self.layout / "blobs" / algorithm / hexdigest

    def unpacked_size(self) -> int:
        """The uncompressed layers' bytes (the tars' lengths), read through."""
        total = 0
        for layer in self.layers:
            with _open_layer(self.blob(layer.digest), layer.media_type) as stream:
                while chunk := stream.read(1 << 20):
                    total += len(chunk)
        return total

    def unpack(self, rootfs: Path) -> Path:
        """The layers applied in order into ``rootfs`` (made if missing): whiteouts (``.wh.NAME``, and
        ``.wh..wh..opq``) remove what lower layers put there. Device nodes are skipped (a runtime makes /dev);
        ownership is kept only where this process may set it (as root). Made for this repository's image (one
        layer, from build.sh), though it refuses an entry that would land outside ``rootfs``."""
        rootfs.mkdir(parents=True, exist_ok=True)
        for layer in self.layers:
            with (
                _open_layer(self.blob(layer.digest), layer.media_type) as stream,
                tarfile.open(fileobj=stream, mode="r|") as tar,
            ):
                for member in tar:
                    name = posixpath.normpath(member.name.lstrip("/")).removeprefix("./")
                    if name in ("", ".") or name.startswith("../"):
                        continue
                    folder, base = posixpath.split(name)
                    if base == ".wh..wh..opq":
                        _clear(rootfs / folder)
                        continue
                    if base.startswith(".wh."):
                        _remove(rootfs / folder / base.removeprefix(".wh."))
                        continue
                    if member.ischr() or member.isblk() or member.isfifo():
                        continue
                    _refuse_escape(rootfs, name, member)
                    member.name = name
                    target = rootfs / name
                    if not member.isdir() and (target.exists() or target.is_symlink()):
                        _remove(target)
                    tar.extract(member, rootfs, set_attrs=True, **_AS_IS)
        return rootfs

    def unshare_argv(self, rootfs: Path, argv: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
        """A command line that runs ``argv`` (``config.argv()``'s) in ``rootfs`` (``unpack()``'s) as the image's
        user, in its working directory: util-linux's unshare makes a user namespace mapping this process's user to
        the image's, chroots into ``rootfs`` and execs argv[0], looked up on the image's PATH (or ``env``'s), in
        place, so the process Popen starts is the program itself (signals and exit codes are its own). Pass the
        environment (``config.environment()``'s) as Popen's ``env``; files the program reads (a kubeconfig) go
        inside ``rootfs``. No other namespace: the network is this machine's (127.0.0.1 is the test bed's)."""
        uid, gid = self.config.uid_gid()
        program = self.config.which(argv[0], rootfs, env)
        return [
            shutil.which("unshare") or "/usr/bin/unshare",
            "--user",
            f"--map-user={uid}",
            f"--map-group={gid}",
            f"--root={rootfs}",
            f"--wd={self.config.working_dir}",
            program,
            *argv[1:],
        ]


def read_image(layout: str | os.PathLike[str], ref: str | None = None) -> Image:
    """The image the layout's index.json names ``ref`` (its org.opencontainers.image.ref.name), or its only image
    when ``ref`` is None. Digests are checked as blobs are read."""
    layout = Path(layout)
    index = json.loads((layout / "index.json").read_text())
    manifests = [entry for entry in index.get("manifests", []) if entry.get("mediaType", MANIFEST) == MANIFEST]
    if ref is not None:
        manifests = [entry for entry in manifests if entry.get("annotations", {}).get(REF_NAME) == ref]
    if len(manifests) != 1:
        names = [entry.get("annotations", {}).get(REF_NAME, entry["digest"]) for entry in index.get("manifests", [])]
        raise LookupError(f"{layout}: {len(manifests)} images match {ref!r} (it holds {names})")
    entry = manifests[0]
    manifest = json.loads(_read_blob(layout, entry["digest"], entry["size"]))
    config_entry = manifest["config"]
    whole = json.loads(_read_blob(layout, config_entry["digest"], config_entry["size"]))
    config = whole.get("config") or {}
    env: dict[str, str] = {}
    for item in config.get("Env") or []:
        name, _, value = item.partition("=")
        env[name] = value
    diff_ids = whole.get("rootfs", {}).get("diff_ids", [])
    layers = tuple(
        Layer(layer["digest"], layer["size"], layer["mediaType"], diff_ids[i] if i < len(diff_ids) else "")
        for i, layer in enumerate(manifest.get("layers", []))
    )
    return Image(
        layout=layout,
        ref=entry.get("annotations", {}).get(REF_NAME, ""),
        digest=entry["digest"],
        manifest_size=entry["size"],
        config_digest=config_entry["digest"],
        config_size=config_entry["size"],
        config=ImageConfig(
            entrypoint=tuple(config.get("Entrypoint") or ()),
            cmd=tuple(config.get("Cmd") or ()),
            env=env,
            user=config.get("User") or "",
            working_dir=config.get("WorkingDir") or "/",
            labels=dict(config.get("Labels") or {}),
            stop_signal=config.get("StopSignal") or "SIGTERM",
        ),
        os=whole.get("os", ""),
        architecture=whole.get("architecture", ""),
        created=whole.get("created", ""),
        layers=layers,
    )


def _read_blob(layout: Path, digest: str, size: int) -> bytes:
    algorithm, _, hexdigest = digest.partition(":")
    data = (layout / "blobs" / algorithm / hexdigest).read_bytes()
    if len(data) != size or hashlib.new(algorithm, data).hexdigest() != hexdigest:
        raise ValueError(f"{layout}: blob {digest} is not what its descriptor says")
    return data


def _open_layer(path: Path, media_type: str) -> IO[bytes]:
    if media_type.endswith("+gzip") or media_type.endswith(".gzip"):
        return gzip.open(path, "rb")
    if media_type.endswith(".tar") or media_type.endswith("tar"):
        return path.open("rb")
    raise ValueError(f"layer {path.name}: media type {media_type} is not read here")


def _keep_as_is(member: tarfile.TarInfo, _path: str) -> tarfile.TarInfo:
    """The layer's own modes and links (tarfile's 'data' filter would refuse absolute symlinks, which a root
    filesystem has, e.g. the virtualenv's python3.11 -> /usr/bin/python3.11); _refuse_escape guards instead."""
    return member


_AS_IS = {"filter": _keep_as_is} if hasattr(tarfile, "data_filter") else {}  # Python 3.11.4 and later


def _refuse_escape(rootfs: Path, name: str, member: tarfile.TarInfo) -> None:
    """Nothing is written outside ``rootfs``: through a symbolic link a layer made (a folder of the path is one),
    or by a hard link to a file outside it."""
    parent = rootfs
    for part in posixpath.dirname(name).split("/") if posixpath.dirname(name) else ():
        parent = parent / part
        if parent.is_symlink():
            raise ValueError(f"layer entry {name}: {parent.relative_to(rootfs)} is a symbolic link")
    if member.islnk():
        target = posixpath.normpath(member.linkname.lstrip("/")).removeprefix("./")
        if target.startswith("../") or target == "..":
            raise ValueError(f"layer entry {name}: a hard link to {member.linkname}, outside the image")
        member.linkname = target


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def _clear(folder: Path) -> None:
    if folder.is_dir():
        for child in folder.iterdir():
            _remove(child)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("layout")
    parser.add_argument("--ref", default=None, help="the tag (default: the layout's only image)")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--json", action="store_true", help="digest, sizes and config as JSON")
    shown.add_argument("--summary", action="store_true", help="one line for people")
    shown.add_argument("--digest-size", action="store_true", help='"DIGEST SIZE" (the bytes a registry stores)')
    options = parser.parse_args(argv)
    image = read_image(options.layout, options.ref)
    if options.digest_size:
        print(image.digest, image.size)
        return 0
    unpacked = image.unpacked_size()
    if options.summary:
        print(
            f"{image.digest}, {_mb(image.size)} MB compressed, {_mb(unpacked)} MB unpacked, "
            f"{len(image.layers)} layer(s), user {image.config.user or 'root'}, "
            f"entrypoint {json.dumps(list(image.config.entrypoint))}"
        )
        return 0
    print(
        json.dumps(
            {
                "ref": image.ref,
                "digest": image.digest,
                "size": image.size,
                "unpacked_size": unpacked,
                "os": image.os,
                "architecture": image.architecture,
                "created": image.created,
                "entrypoint": list(image.config.entrypoint),
                "cmd": list(image.config.cmd),
                "env": image.config.env,
                "user": image.config.user,
                "working_dir": image.config.working_dir,
                "labels": image.config.labels,
                "stop_signal": image.config.stop_signal,
                "layers": [layer.__dict__ for layer in image.layers],
            },
            indent=2,
        )
    )
    return 0


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f}"


if __name__ == "__main__":
    sys.exit(main())
