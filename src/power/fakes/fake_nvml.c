/* A stand-in for libnvidia-ml.so.1: exports the real NVML symbol names (the _v2 ones where nvml.h
 * maps to them) with readings scripted by the file named in $CGN_FAKE_NVML_FILE, re-read on every
 * nvmlDeviceGetCount_v2. One device per line:
 *   UUID POWER_MW ENERGY_MJ LIMIT_MW MEMORY_BYTES NAME...
 * Built only for tests (src/power/CMakeLists.txt). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEVICES 16

struct nvmlDevice_st {
  char uuid[96];
  char name[96];
  unsigned power_mw;
  unsigned long long energy_mj;
  unsigned limit_mw;
  unsigned long long memory;
};

typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;

static struct nvmlDevice_st devices[MAX_DEVICES];
static unsigned device_count;
static int inits;

int nvmlInit_v2(void) {
  ++inits;
  return 0;
}

int nvmlShutdown(void) {
  if (inits == 0)
    return 1; /* NVML_ERROR_UNINITIALIZED */
  --inits;
  return 0;
}

int nvmlDeviceGetCount_v2(unsigned* count) {
  if (inits == 0)
    return 1;
  const char* path = getenv("CGN_FAKE_NVML_FILE");
  FILE* f = path ? fopen(path, "r") : NULL;
  device_count = 0;
  if (f) {
    char line[512];
    while (device_count < MAX_DEVICES && fgets(line, sizeof line, f)) {
      struct nvmlDevice_st* d = &devices[device_count];
      int used = 0;
      if (sscanf(line, "%95s %u %llu %u %llu %n", d->uuid, &d->power_mw, &d->energy_mj, &d->limit_mw,
                 &d->memory, &used) >= 5) {
        snprintf(d->name, sizeof d->name, "%s", line + used);
        d->name[strcspn(d->name, "\n")] = '\0';
        ++device_count;
      }
    }
    fclose(f);
  }
  *count = device_count;
  return 0;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, struct nvmlDevice_st** device) {
  if (inits == 0)
    return 1;
  if (index >= device_count)
    return 2; /* NVML_ERROR_INVALID_ARGUMENT */
  *device = &devices[index];
  return 0;
}

static int copy_string(const char* s, char* out, unsigned length) {
  if (strlen(s) + 1 > length)
    return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
  strcpy(out, s);
  return 0;
}

int nvmlDeviceGetUUID(struct nvmlDevice_st* d, char* uuid, unsigned length) {
  return copy_string(d->uuid, uuid, length);
}
int nvmlDeviceGetName(struct nvmlDevice_st* d, char* name, unsigned length) {
  return copy_string(d->name, name, length);
}

int nvmlDeviceGetPowerUsage(struct nvmlDevice_st* d, unsigned* mw) {
  *mw = d->power_mw;
  return 0;
}

int nvmlDeviceGetTotalEnergyConsumption(struct nvmlDevice_st* d, unsigned long long* mj) {
  if (d->energy_mj == 0)
    return 3; /* NVML_ERROR_NOT_SUPPORTED: pre-Volta */
  *mj = d->energy_mj;
  return 0;
}

int nvmlDeviceGetEnforcedPowerLimit(struct nvmlDevice_st* d, unsigned* mw) {
  *mw = d->limit_mw;
  return 0;
}

int nvmlDeviceGetMemoryInfo(struct nvmlDevice_st* d, nvmlMemory_t* m) {
  m->total = d->memory;
  m->used = 0;
  m->free = d->memory;
  return 0;
}

/* For tests: how many nvmlInit_v2 calls are not yet matched by nvmlShutdown. */
int cgn_fake_nvml_inits(void) {
  return inits;
}
