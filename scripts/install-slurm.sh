#!/usr/bin/env bash
# Installs Debian's Slurm for the Slurm test (crates/spools-cli/tests/slurm.rs), when
# something it needs is missing:
#
#   slurmctld, slurmd, slurm-client   the daemons and srun/sbatch/sinfo (with them
#                                     slurm-wlm-basic-plugins: auth/none, cred/none,
#                                     mpi/pmi2, mpi/pmix_v4; and munge, which the test's
#                                     cluster does not use)
#   libpmi2-0                         Slurm's PMI2 client library (srun --mpi=pmi2)
#   libpmix-dev                       libpmix.so, which Slurm's mpi/pmix plugin opens by
#                                     that name in /usr/lib/<arch>/pmix2/lib (libpmix2
#                                     alone has only libpmix.so.2)
#
# Package scripts must not start a system-wide slurmctld, slurmd or munged: while it
# installs, a policy-rc.d that denies every start is put in place (unless one is there).
# Idempotent and quiet: does nothing when everything is there. The test starts its own
# cluster with scripts/slurm-cluster.sh.
set -euo pipefail
# Debian puts the daemons in /usr/sbin, which a user's PATH may lack.
PATH="$PATH:/usr/sbin:/sbin"

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
arch="$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)"
plugins="/usr/lib/$arch/slurm-wlm"

missing=()
for tool in slurmctld slurmd srun sbatch sinfo scancel; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
for so in auth_none cred_none mpi_pmi2 mpi_pmix_v4; do
  [ -e "$plugins/$so.so" ] || missing+=("$so.so")
done
[ -e "/usr/lib/$arch/libpmi2.so.0" ] || missing+=("libpmi2.so.0")
[ -e "/usr/lib/$arch/pmix2/lib/libpmix.so" ] || missing+=("pmix2/lib/libpmix.so")
[ "${#missing[@]}" = 0 ] && exit 0

echo "== installing Debian's Slurm (slurmctld slurmd slurm-client libpmi2-0 libpmix-dev): missing ${missing[*]}"
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# scripts/install-slurm.sh: no daemon starts while it installs\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod 755 "$policy"
  trap '$SUDO rm -f "$policy"' EXIT
fi
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
  slurmctld slurmd slurm-client libpmi2-0 libpmix-dev >/dev/null
command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v srun >/dev/null
echo "== Slurm $(dpkg-query -W -f='${Version}' slurmd) installed"
