# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
# BPF objects and their libbpf skeletons.
#
#   bpftel_bpf_object(NAME SOURCE)
#
# compiles SOURCE with clang -target bpf against vmlinux/<arch>/vmlinux.h into
# NAME.bpf.o, generates NAME.skel.h with bpftool, and defines an INTERFACE library
# NAME_skel whose include path holds the skeleton. Nothing generated is committed.

find_program(BPFTEL_CLANG NAMES clang clang-16 clang-15 clang-14 REQUIRED)
find_program(BPFTEL_BPFTOOL NAMES bpftool PATHS /usr/sbin /sbin REQUIRED)

string(TOLOWER "${CMAKE_SYSTEM_PROCESSOR}" _proc)
if(_proc MATCHES "^(x86_64|amd64|i.86)$")
  set(BPFTEL_ARCH x86)
elseif(_proc MATCHES "^(aarch64|arm64)$")
  set(BPFTEL_ARCH arm64)
elseif(_proc MATCHES "^(ppc64le|powerpc64le)$")
  set(BPFTEL_ARCH powerpc)
elseif(_proc MATCHES "^s390x$")
  set(BPFTEL_ARCH s390)
elseif(_proc MATCHES "^riscv64$")
  set(BPFTEL_ARCH riscv)
else()
  message(FATAL_ERROR "bpftel: no BPF arch for processor '${CMAKE_SYSTEM_PROCESSOR}'")
endif()

set(BPFTEL_VMLINUX_DIR "${PROJECT_SOURCE_DIR}/vmlinux/${BPFTEL_ARCH}")
if(NOT EXISTS "${BPFTEL_VMLINUX_DIR}/vmlinux.h")
  message(FATAL_ERROR "bpftel: ${BPFTEL_VMLINUX_DIR}/vmlinux.h is missing; "
                      "run tools/gen-vmlinux.sh on a ${BPFTEL_ARCH} machine with BTF")
endif()

set(BPFTEL_BPF_OUT "${PROJECT_BINARY_DIR}/bpf")
file(MAKE_DIRECTORY "${BPFTEL_BPF_OUT}")

function(bpftel_bpf_object name src)
  set(obj "${BPFTEL_BPF_OUT}/${name}.bpf.o")
  set(skel "${BPFTEL_BPF_OUT}/${name}.skel.h")
  get_filename_component(src_abs "${src}" ABSOLUTE)
  add_custom_command(
    OUTPUT "${obj}"
    COMMAND "${BPFTEL_CLANG}" -g -O2 -target bpf -D__TARGET_ARCH_${BPFTEL_ARCH}
            -Wall -Werror -Wno-unused-function
            -I "${BPFTEL_VMLINUX_DIR}" -I "${PROJECT_SOURCE_DIR}/bpf"
            -I "${PROJECT_SOURCE_DIR}"
            -MD -MF "${obj}.d" -c "${src_abs}" -o "${obj}"
    DEPFILE "${obj}.d"
    DEPENDS "${src_abs}"
    COMMENT "BPF ${name}.bpf.o"
    VERBATIM)
  add_custom_command(
    OUTPUT "${skel}"
    COMMAND "${BPFTEL_BPFTOOL}" gen skeleton "${obj}" name "${name}" > "${skel}.tmp"
    COMMAND "${CMAKE_COMMAND}" -E rename "${skel}.tmp" "${skel}"
    DEPENDS "${obj}"
    COMMENT "skeleton ${name}.skel.h"
    VERBATIM)
  add_custom_target(${name}_skel_gen DEPENDS "${skel}")
  add_library(${name}_skel INTERFACE)
  target_include_directories(${name}_skel INTERFACE "${BPFTEL_BPF_OUT}")
  add_dependencies(${name}_skel ${name}_skel_gen)
endfunction()
