#!/usr/bin/env bash
# Install what numapore needs on a Debian bookworm machine (run as root, or with sudo available):
# the bioinformatics tools from Debian, a Python venv in .venv with the pinned libraries and the
# numapore package. Run the workflow with this clone's own profile, by path:
# `snakemake --profile profiles/hpc-numa` from the repository root.
#   ./setup.sh                  what running the workflow needs, nothing more (idempotent; cheap again)
#   ./setup.sh --tests          also the test machinery (Slurm + MariaDB, QEMU, Chromium, strace, ...)
#   ./setup.sh --no-apt [...]   no Debian packages: the tools are already on PATH (no root needed)
#   ./setup.sh --list [...]     print what the other options would install, install nothing
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$repo"

tests=false
apt=true
list=false
for arg in "$@"; do
    case $arg in
    --tests) tests=true ;;
    --no-apt) apt=false ;;
    --list) list=true ;;
    -h | --help)
        sed -n '2,10p' "$0"
        exit 0
        ;;
    *)
        echo "numapore: setup.sh: unknown option '$arg' (options: --tests, --no-apt, --list)" >&2
        exit 2
        ;;
    esac
done

# What the workflow runs (the README's "Quick start" and "Tests" list the same packages).
apt_packages=(samtools minimap2 bwa bowtie2 snap-aligner nanopolish numactl tabix time python3-venv
    # the E. coli DH10B genome of the demo; lambda-phage short reads as an example (config/README.md)
    nanook-examples bowtie2-examples
    # VBZ-compressed FAST5; tombo's R9.4 pore models for the demo's simulated raw signal
    libvbz-hdf-plugin0 tombo
    # numapore's compiled svb-zd encoder, FAST5 reader and pileup core (C through cffi:
    # numapore/signal/svbzd_build.py, fast5_core_build.py, pileup/core_build.py; the
    # FAST5 reader links HDF5, libdeflate, zlib; the pileup core's BAM reader libdeflate)
    gcc python3-dev libhdf5-dev libdeflate-dev zlib1g-dev pkg-config
    # FUSE for the comparison's emulated slow storage (numapore.compare.slowfs: fusermount3)
    fuse3
    # DMRs between groups and haplotypes: DSS in R (Bioconductor; bioconda bioconductor-dss)
    r-base-core r-bioc-dss)
# What only the tests use (--tests).
test_apt_packages=(
    # short reads simulated for the tests (art_illumina)
    art-nextgen-simulation-tools
    # the emulated 2-node NUMA guest (virtme-ng comes from PyPI, requirements-tests.txt)
    qemu-system-x86 linux-image-amd64 busybox-static
    # the multi-node Slurm cluster (tests/slurm_cluster.py): Slurm and its client commands, munge,
    # job accounting for sacct (slurmdbd storing in MariaDB), and each node's network namespace
    # and veth pair on a bridge (ip; nsenter and unshare come with util-linux)
    slurm-wlm munge slurmdbd mariadb-server iproute2
    # the concurrency tests trace which files each job writes
    strace
    # the report tests open the HTML reports in a headless browser, and the tracks in IGV
    # (headless under Xvfb; xvfb-run needs xauth)
    chromium igv xvfb xauth)
$tests && apt_packages+=("${test_apt_packages[@]}")
requirements=(requirements.txt)
$tests && requirements+=(requirements-tests.txt)
# The installer of the pinned requirements (setup only; the workflow never runs it).
uv_requirement=uv==0.13.9
if $list; then
    $apt && echo "debian: ${apt_packages[*]}"
    echo "python: ${requirements[*]}"
    exit 0
fi

if $apt; then
    missing=()
    for p in "${apt_packages[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if ((${#missing[@]})); then
        echo "setup: installing Debian packages: ${missing[*]}"
        sudo=""
        [[ $(id -u) -eq 0 ]] || sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
    fi
else
    # No root: say which of the workflow's tools are not on PATH, then go on (the run's own
    # check names any that a rule needs).
    absent=()
    for tool in samtools minimap2 bwa bowtie2 snap-aligner nanopolish numactl bgzip tabix gcc; do
        command -v "$tool" >/dev/null || absent+=("$tool")
    done
    ((${#absent[@]} == 0)) || echo "setup: --no-apt: not on PATH: ${absent[*]}"
fi

if [[ ! -x .venv/bin/python ]]; then
    echo "setup: creating .venv"
    python3 -m venv .venv
fi
# Reinstall only when the requirements (or the Python) changed since the last successful install.
stamp=.venv/.requirements.sha256
want=$( (cat "${requirements[@]}" && .venv/bin/python -VV) | sha256sum | cut -d' ' -f1)
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
    # pip resolves the requirements once into a wheelhouse kept outside the clone (keyed by the
    # requirements and the Python), with uv's wheel beside them; uv then installs from there
    # alone, offline. pip unpacking ~150 wheels took 70-120 s of a setup on 2 cores, uv 3-25 s:
    # the same versions either way, since the wheelhouse holds nothing else.
    wheels="${NUMAPORE_WHEELS:-${XDG_CACHE_HOME:-$HOME/.cache}/numapore/wheels}/$want"
    if [[ ! -f $wheels/.complete ]]; then
        echo "setup: fetching the Python packages as wheels into $wheels (once per requirements)"
        .venv/bin/pip install -q --upgrade pip
        .venv/bin/pip wheel -q -w "$wheels" "$uv_requirement" "${requirements[@]/#/-r}"
        touch "$wheels/.complete"
    fi
    echo "setup: installing Python packages into .venv (${requirements[*]})"
    .venv/bin/pip install -q --no-index --find-links "$wheels" "$uv_requirement"
    .venv/bin/uv pip install -q --python .venv/bin/python --no-index --find-links "$wheels" \
        "${requirements[@]/#/-r}"
    # Bytecode compiled afterwards on every core at once, leaving out the packages' own test
    # folders (a quarter of the files, never imported here): 41 -> 27 s on 2 cores.
    site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_path('purelib'))")
    .venv/bin/python -W ignore -m compileall -q -j 0 -x '/(tests?|testing)/' "$site" >/dev/null ||
        echo "setup: some installed files did not compile to bytecode (Python compiles them on import)"
    echo "$want" >"$stamp"
fi

# numapore itself, installed editable into .venv with its compiled parts (C through cffi,
# built by setup.py) and its console command: reinstalled only when its build inputs changed.
pkg_stamp=.venv/.numapore.sha256
pkg_want=$(cat pyproject.toml setup.py scripts/numapore/*/*_build.py scripts/numapore/*/*.c | sha256sum | cut -d' ' -f1)
if [[ ! -f $pkg_stamp || $(cat "$pkg_stamp") != "$pkg_want" ]] || ! .venv/bin/python -c "import numapore.cli" 2>/dev/null; then
    echo "setup: installing numapore (building its compiled parts)"
    .venv/bin/pip install -q --no-build-isolation --no-deps -e .
    echo "$pkg_want" >"$pkg_stamp"
fi

# Every rule script is a Python process that imports the package: its bytecode is written once
# here, even where PYTHONDONTWRITEBYTECODE is set (Python then recompiles it in every job).
# A source edited afterwards is compiled in memory as usual: a stale cache is never used.
PYTHONDONTWRITEBYTECODE= .venv/bin/python -m compileall -q scripts benchmarks >/dev/null

# The E. coli K-12 DH10B genome (Debian nanook-examples): reference of the demo and the tests.
genome=resources/ecoli_dh10b.fa
if [[ ! -s $genome ]]; then
    mkdir -p resources
    tar -xzOf /usr/share/doc/nanook/examples/data.tar.gz \
        data/nanook_ecoli_500/references/ecoli_dh10b_cs.fasta >"$genome.tmp"
    mv "$genome.tmp" "$genome"
fi

# Earlier versions linked the profiles into ~/.config/snakemake/, where `--profile NAME` finds
# them from any clone: the clone that ran setup.sh last. The README names the profile by path
# (`--profile profiles/hpc-numa`: this clone's); remove the links to this clone's profiles.
profile_home="${XDG_CONFIG_HOME:-$HOME/.config}/snakemake"
for p in profiles/*/; do
    link="$profile_home/$(basename "$p")"
    if [[ -L $link && $(readlink "$link") == "$repo/profiles/$(basename "$p")" ]]; then
        rm "$link"
        echo "setup: removed $link (use --profile profiles/$(basename "$p") from the repository root)"
    fi
done
echo "setup: done. Activate with: source .venv/bin/activate"
