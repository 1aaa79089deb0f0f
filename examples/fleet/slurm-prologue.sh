#!/bin/sh
# Slurm prologue: before a job starts on a node, make the site's CUDA
# Python environment whole there from the registry; a node where it is
# whole already costs one quick check (no download, no registry request).
#
# Install (every compute node):
#   install -m 755 cudadeps-ensure /usr/local/sbin/cudadeps-ensure
#   install -m 755 slurm-prologue.sh /etc/slurm/prolog.d/50-cudadeps.sh
#   slurm.conf:  Prolog=/etc/slurm/prolog.d/*
#   /etc/cudadeps/prologue.env (sourced; the settings of cudadeps-ensure):
#     CUDADEPS_TARGET=torch
#     CUDADEPS_PYTHON=/opt/envs/torch/bin/python
#     CUDADEPS_REFERENCE=oci://registry.internal/cudadeps/torch:2.11-cu13
#     CUDADEPS_PREFIX=/opt/cudadeps
#     DOCKER_CONFIG=/etc/cudadeps/docker      # config.json with the login
#     SSL_CERT_FILE=/etc/cudadeps/site-ca.pem # when the registry's CA is private
#     CUDADEPS_LOCK=/run/cudadeps.lock        # jobs starting at once wait
#     CUDADEPS_ON_FAILURE=drain               # or: continue
#     export CUDADEPS_TARGET CUDADEPS_PYTHON ... (every line above)
#
# Exit status: 0 lets the job start. A non-zero status makes Slurm drain
# the node and requeue the job: CUDADEPS_ON_FAILURE=drain (the default)
# does that when the environment cannot be made whole; continue logs it
# and lets the job start anyway. The settings file is
# $CUDADEPS_PROLOGUE_CONFIG when set. Messages go to syslog (tag
# cudadeps-prologue) when logger(1) is there, else to stderr.
config=${CUDADEPS_PROLOGUE_CONFIG:-/etc/cudadeps/prologue.env}
if [ -r "$config" ]; then
	# shellcheck disable=SC1090
	. "$config"
fi
ensure=${CUDADEPS_ENSURE:-$(dirname "$0")/cudadeps-ensure}
[ -x "$ensure" ] || ensure=cudadeps-ensure

log() {
	if command -v logger >/dev/null 2>&1 && [ -z "${CUDADEPS_PROLOGUE_STDERR:-}" ]; then
		logger -t cudadeps-prologue
	else
		cat >&2
	fi
}

# The job's id, where Slurm gives it, in every message.
job=${SLURM_JOB_ID:+job $SLURM_JOB_ID: }
out=$("$ensure" 2>&1)
status=$?
if [ -n "$out" ]; then
	printf '%s\n' "$out" | sed "s/^/$job/" | log
fi
[ "$status" -eq 0 ] && exit 0
case ${CUDADEPS_ON_FAILURE:-drain} in
continue)
	echo "${job}${CUDADEPS_TARGET:-the target} is not whole; the job starts anyway (CUDADEPS_ON_FAILURE=continue)" | log
	exit 0
	;;
*)
	echo "${job}${CUDADEPS_TARGET:-the target} is not whole; Slurm drains the node (CUDADEPS_ON_FAILURE=drain)" | log
	exit 1
	;;
esac
