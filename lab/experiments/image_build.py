"""The container image (scripts/build_image.sh) built on this host with buildah on a
debootstrap base, without Horovod and then with it built in the image, each time running the
bench's short job inside: what it printed, both builds in one file (the script's standard
output: its summary lines, build time, image id and size, and the short job's table; buildah's
build log goes to standard error, the terminal)."""

from lab.registry import Lab, Step

SUMMARY = "the container image built here, without and with Horovod, its short job run inside"
NEEDS = ("root",)


def steps(lab: Lab) -> list[Step]:
    out = lab.path("image_build.txt")
    return [Step(("scripts/build_image.sh", "--debootstrap", "--no-horovod"), stdout=out),
            Step(("scripts/build_image.sh", "--base", "localhost/ralp-base:bookworm-python3.11"),
                 stdout=out, append=True)]
