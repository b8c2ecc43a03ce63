# SPDX-License-Identifier: Apache-2.0
# Bash completion for hkc: commands, each command's options, targets, files.
# Installed by `cmake --install` as share/bash-completion/completions/hkc (loaded on demand by
# bash-completion); or `source scripts/hkc-completion.bash` by hand.

_hkc_targets() {
  # what this machine's toolchains list (fast: no test compiles), else the usual names
  local list
  list=$(command "${COMP_WORDS[0]}" targets --no-probe 2> /dev/null |
    sed -n 's/^ *builds: //p' | tr '\n' ' ')
  echo "host ${list:-gfx900 gfx906 gfx908 gfx90a gfx1030 sm_75 sm_80 sm_86 sm_89 sm_90 sm_90a sm_100 sm_120}"
}

_hkc() {
  local cur prev cmd i
  COMPREPLY=()
  cur=${COMP_WORDS[COMP_CWORD]}
  prev=${COMP_WORDS[COMP_CWORD - 1]}
  local commands="build run tune inspect targets keygen sign merge cache import --help --version"
  local common="-q --quiet -v --verbose -h --help"
  cmd=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    case ${COMP_WORDS[i]} in -*) ;; *) cmd=${COMP_WORDS[i]}; break ;; esac
  done
  if [ -z "$cmd" ]; then
    COMPREPLY=($(compgen -W "$commands" -- "$cur"))
    return
  fi
  # values of options
  case $prev in
    -t | --target)
      if [[ $cur == *,* ]]; then # a comma-separated list: complete its last name
        local head=${cur%,*} t
        COMPREPLY=()
        for t in $(_hkc_targets); do [[ $t == "${cur##*,}"* ]] && COMPREPLY+=("$head,$t"); done
      else
        COMPREPLY=($(compgen -W "$(_hkc_targets)" -- "$cur"))
      fi
      return ;;
    --merge-targets | --ptx)
      COMPREPLY=($(compgen -W "$(_hkc_targets)" -- "$cur")); return ;;
    --fusion) COMPREPLY=($(compgen -W "auto none" -- "$cur")); return ;;
    --tune) COMPREPLY=($(compgen -W "model default" -- "$cur")); return ;;
    --save-outputs) COMPREPLY=($(compgen -d -- "$cur")); return ;;
    -o | --output | --tuning-db | --sign | --key | --trust | --weights | --weights-map | --report | --input | --param)
      COMPREPLY=($(compgen -f -- "$cur")); return ;;
    -j | --jobs | --batch | --seed | --runs | --warmup | --repeats | --top | --zstd-level | --tune-verify | \
      --compile-timeout | --host-threads | --cache-max-size | --max-size | --disasm | --kernel-option)
      return ;;
  esac
  local opts
  case $cmd in
    build) opts="-o --output -t --target --ptx --no-ptx --merge-targets -j --jobs --compile-timeout --no-cache
      --Werror-spills --no-pdl --fusion --fusion-report --tune --tuning-db --tune-verify --zstd-level --kernel-option
      --host-threads --sign --no-sign --weights --weights-map --cache-max-size --json" ;;
    run) opts="-t --target --batch --seed --input --param --weights --weights-map --random-params --save-outputs
      --runs --warmup --profile --repeats --no-pdl --prefer-ptx --trust --no-user-key --require-signature
      --allow-unsigned --allow-unsigned-native --json" ;;
    tune) opts="-t --target -o --output --top --runs --warmup --report -j --jobs --no-cache --dry-run --merge
      --kernel-option --host-threads --cache-max-size --json" ;;
    inspect) opts="--json --trust --plan --batch --disasm -t --target" ;;
    targets) opts="--json --no-probe" ;;
    keygen) opts="-o --output" ;;
    sign) opts="--key -o --output" ;;
    merge) opts="-o --output --sign --no-sign --trust --no-user-key --allow-unsigned-inputs" ;;
    cache)
      case " ${COMP_WORDS[*]} " in
        *" stats "*) opts="--json" ;;
        *" clean "*) opts="--max-size" ;;
        *) COMPREPLY=($(compgen -W "stats clean" -- "$cur")); return ;;
      esac ;;
    import)
      case " ${COMP_WORDS[*]} " in
        *" hf "* | *" onnx "*) COMPREPLY=($(compgen -f -- "$cur")); return ;;
        *) COMPREPLY=($(compgen -W "hf onnx" -- "$cur")); return ;;
      esac ;;
    *) return ;;
  esac
  if [[ $cur == -* ]]; then
    COMPREPLY=($(compgen -W "$opts $common" -- "$cur"))
  else
    case $cmd in
      build | tune) COMPREPLY=($(compgen -f -X '!*.yaml' -- "$cur") $(compgen -f -X '!*.yml' -- "$cur") $(compgen -d -- "$cur")) ;;
      run | inspect | sign | merge) COMPREPLY=($(compgen -f -X '!*.hkpack' -- "$cur") $(compgen -d -- "$cur")) ;;
    esac
  fi
}
complete -F _hkc hkc
