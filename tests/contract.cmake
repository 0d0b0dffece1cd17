# SPDX-License-Identifier: Apache-2.0
# Contract sections 1, 3 and 4 (devices, targets, validation order, DeviceMismatch exactness), per backend.
crossfire_backend_test(contract REGISTERED AREA contract SOURCES contract_devices_test.cpp contract_mismatch_test.cpp
                       contract_validation_test.cpp)

# Registration itself (issue 15): names, refusals, slots, a registered backend's devices in messages.
crossfire_core_test(registry AREA contract SOURCES registry_test.cpp)
