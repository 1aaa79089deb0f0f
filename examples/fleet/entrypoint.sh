#!/bin/sh
# Container entrypoint: make the image's CUDA Python environment whole from
# the site's registry (once per container's volume or cache; quick when it
# is whole already), then run the container's command with the loader set
# up.
#
#   COPY cudadeps cudadeps-ensure entrypoint.sh /usr/local/bin/
#   ENV CUDADEPS_TARGET=torch CUDADEPS_PYTHON=/opt/venv/bin/python \
#       CUDADEPS_REFERENCE=oci://registry.internal/cudadeps/torch:2.11-cu13
#   ENTRYPOINT ["/usr/local/bin/entrypoint.sh"]
#   CMD ["python", "train.py"]
#
# Settings: those of cudadeps-ensure (CUDADEPS_TARGET, CUDADEPS_REFERENCE,
# CUDADEPS_PYTHON, the timeouts), with the registry's login in
# DOCKER_CONFIG (a mounted dockerconfigjson secret) and a private CA in
# SSL_CERT_FILE; CUDADEPS_PREFIX (the store, better on a volume: pulled
# once, kept across restarts); CUDADEPS_ON_FAILURE=fail (the default: exit
# 1 before the command) or continue (warn, then run the command anyway).
ensure=${CUDADEPS_ENSURE:-$(dirname "$0")/cudadeps-ensure}
[ -x "$ensure" ] || ensure=cudadeps-ensure

if ! "$ensure"; then
	case ${CUDADEPS_ON_FAILURE:-fail} in
	continue)
		echo "entrypoint: ${CUDADEPS_TARGET:-the target} is not whole; running the command anyway" >&2
		;;
	*)
		echo "entrypoint: ${CUDADEPS_TARGET:-the target} is not whole; not running the command (CUDADEPS_ON_FAILURE=continue runs it anyway)" >&2
		exit 1
		;;
	esac
fi

# Where cudadeps could not place a library beside the objects that need it,
# its activation script sets LD_LIBRARY_PATH.
prefix=${CUDADEPS_PREFIX:-${XDG_DATA_HOME:-${HOME:-/root}/.local/share}/cudadeps}
if [ -r "$prefix/env.sh" ]; then
	# shellcheck disable=SC1091
	. "$prefix/env.sh"
fi
exec "$@"
