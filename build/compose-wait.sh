#!/usr/bin/env bash
# build/compose-wait.sh PROJECT [TIMEOUT_SECONDS]: waits until the compose project's stack is
# ready, as `docker compose up --wait` does with Compose v2 (Compose v1, Debian's docker-compose,
# has no --wait): every container with a health check healthy, the others running, one-shot
# containers (the certs init) exited 0. Fails at once when a container exits with an error or
# turns unhealthy after retries, and after TIMEOUT_SECONDS (default 180), printing the containers'
# states and the last log lines of those not ready.
set -euo pipefail
project=${1:?usage: $0 PROJECT [TIMEOUT_SECONDS]}
timeout=${2:-180}
deadline=$((SECONDS + timeout))
while :; do
	ids=$(docker ps -aq --filter "label=com.docker.compose.project=$project")
	[[ -n $ids ]] || { echo "compose-wait: project $project has no containers" >&2; exit 1; }
	# name status exit-code health one-shot(restart policy "no")
	states=$(docker inspect -f '{{index .Config.Labels "com.docker.compose.service"}} {{.State.Status}} {{.State.ExitCode}} {{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}} {{.HostConfig.RestartPolicy.Name}}' $ids)
	pending=() failed=()
	while read -r name status code health restart; do
		if [[ $restart == no || -z $restart ]]; then
			if [[ $status == exited && $code == 0 ]]; then continue; fi
			if [[ $status == exited ]]; then failed+=("$name"); else pending+=("$name"); fi
			continue
		fi
		case $status/$health in
		running/healthy | running/none) ;;
		running/unhealthy) failed+=("$name") ;;
		*) pending+=("$name") ;;
		esac
	done <<<"$states"
	if ((${#failed[@]} == 0 && ${#pending[@]} == 0)); then
		echo "compose-wait: $project is ready"
		exit 0
	fi
	if ((${#failed[@]} > 0 || SECONDS >= deadline)); then
		echo "compose-wait: $project is not ready: failed: ${failed[*]:-none}; waiting for: ${pending[*]:-none}" >&2
		{ echo "service status exit-code health restart-policy"; echo "$states"; } >&2
		for name in "${failed[@]}" "${pending[@]}"; do
			id=$(docker ps -aq --filter "label=com.docker.compose.project=$project" --filter "label=com.docker.compose.service=$name" | head -1)
			echo "--- $name (last log lines)" >&2
			docker logs --tail 20 "$id" 2>&1 | sed 's/^/    /' >&2
		done
		exit 1
	fi
	sleep 1
done
