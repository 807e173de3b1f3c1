# bash completion for homesnap: homesnap completion bash > /etc/bash_completion.d/homesnap
_homesnap() {
	local cur=${COMP_WORDS[COMP_CWORD]} words=""
	if [[ $COMP_CWORD -eq 1 ]]; then
		COMPREPLY=($(compgen -W "restore snapshot prune list verify check-agents ls diff version help completion" -- "$cur"))
		return
	fi
	case ${COMP_WORDS[1]} in
	restore) words="--home --store --jobs --log-level --log-format --snapshot --at --allow-empty --timeout --target --dry-run --force --chown --keep-modes --only --skip --list --output --preset --select-include --select-exclude --check-agents --compare --show-secrets --require-agent-continuity --master-key-file --verify --verify-structure --progress --age-identity-file --auth-key-file --allow-unauthenticated --help --version" ;;
	snapshot) words="--home --store --jobs --log-level --log-format --once --timeout --interval --final-timeout --preset --include --exclude --level --force --allow-shrink --allow-behind --exclude-master-key --accept-key-change --age-identity-file --auth-key-file --allow-unauthenticated --age-recipients-file --age-migrate --age-reencrypt --listen --final-wait-url --final-wait-quiet --start-wait-url --lease-ttl --listen-max-connections --trigger-token-file --trigger-min-interval --journal --journal-verify-interval --keep-last --keep-hourly --keep-daily --keep-weekly --keep-monthly --keep-yearly --keep-within --keep-within-hourly --keep-within-daily --keep-within-weekly --keep-within-monthly --keep-within-yearly --prune-delay --repack --repack-max-unused --repack-grace --keep-on-demand --import --import-onto-head --consolidate-max-archives --prune --output --help --version" ;;
	prune) words="--home --store --jobs --log-level --log-format --keep-last --keep-hourly --keep-daily --keep-weekly --keep-monthly --keep-yearly --keep-within --keep-within-hourly --keep-within-daily --keep-within-weekly --keep-within-monthly --keep-within-yearly --prune-delay --repack --repack-max-unused --repack-grace --keep-on-demand --age-identity-file --auth-key-file --allow-unauthenticated --timeout --dry-run --lease-ttl --output --help --version" ;;
	list) words="--home --store --jobs --log-level --log-format --timeout --output --age-identity-file --auth-key-file --allow-unauthenticated --help --version" ;;
	verify) words="--home --store --jobs --log-level --log-format --snapshot --at --timeout --output --progress --age-identity-file --auth-key-file --allow-unauthenticated --structure --help --version" ;;
	check-agents) words="--home --store --jobs --log-level --log-format --snapshot --at --timeout --output --compare --show-secrets --master-key-file --age-identity-file --auth-key-file --allow-unauthenticated --help --version" ;;
	ls) words="--home --store --jobs --log-level --log-format --snapshot --at --timeout --output --age-identity-file --auth-key-file --allow-unauthenticated --help --version" ;;
	diff) words="--home --store --jobs --log-level --log-format --timeout --output --age-identity-file --auth-key-file --allow-unauthenticated --help --version" ;;
	version) words="" ;;
	help) words="restore snapshot prune list verify check-agents ls diff version help completion" ;;
	completion) words="bash zsh fish" ;;
	esac
	if [[ $cur == -* || ${COMP_WORDS[1]} == help || ${COMP_WORDS[1]} == completion ]]; then
		COMPREPLY=($(compgen -W "$words" -- "$cur"))
	fi
}
complete -o default -F _homesnap homesnap
