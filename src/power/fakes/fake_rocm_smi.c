/* A stand-in for librocm_smi64.so: exports the real ROCm SMI symbol names with readings scripted by
 * the file named in $CGN_FAKE_RSMI_FILE, re-read on every rsmi_num_monitor_devices. One device per
 * line:
 *   UNIQUE_ID(hex) POWER_UW ENERGY_TICKS RESOLUTION_UJ CAP_UW VRAM_BYTES NAME...
 * Built only for tests (src/power/CMakeLists.txt). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEVICES 16

struct device {
  uint64_t id, power_uw, ticks, cap_uw, vram;
  float resolution;
  char name[128];
};

static struct device devices[MAX_DEVICES];
static uint32_t device_count;
static int inits;

uint32_t rsmi_init(uint64_t flags) {
  (void)flags;
  ++inits;
  return 0;
}

uint32_t rsmi_shut_down(void) {
  if (inits > 0)
    --inits;
  return 0;
}

uint32_t rsmi_num_monitor_devices(uint32_t* n) {
  const char* path = getenv("CGN_FAKE_RSMI_FILE");
  FILE* f = path ? fopen(path, "r") : NULL;
  device_count = 0;
  if (f) {
    char line[512];
    while (device_count < MAX_DEVICES && fgets(line, sizeof line, f)) {
      struct device* d = &devices[device_count];
      int used = 0;
      unsigned long long id, p, t, c, v;
      if (sscanf(line, "%llx %llu %llu %f %llu %llu %n", &id, &p, &t, &d->resolution, &c, &v, &used) >= 6) {
        d->id = id;
        d->power_uw = p;
        d->ticks = t;
        d->cap_uw = c;
        d->vram = v;
        snprintf(d->name, sizeof d->name, "%s", line + used);
        d->name[strcspn(d->name, "\n")] = '\0';
        ++device_count;
      }
    }
    fclose(f);
  }
  *n = device_count;
  return 0;
}

#define CHECK(i)           \
  if ((i) >= device_count) \
  return 1 /* RSMI_STATUS_INVALID_ARGS */

uint32_t rsmi_dev_power_get(uint32_t i, uint64_t* power, int* type) {
  CHECK(i);
  *power = devices[i].power_uw;
  *type = 1; /* RSMI_CURRENT_POWER */
  return 0;
}

uint32_t rsmi_dev_energy_count_get(uint32_t i, uint64_t* count, float* resolution, uint64_t* timestamp) {
  CHECK(i);
  *count = devices[i].ticks;
  *resolution = devices[i].resolution;
  *timestamp = 0;
  return 0;
}

uint32_t rsmi_dev_power_cap_get(uint32_t i, uint32_t sensor, uint64_t* cap) {
  CHECK(i);
  (void)sensor;
  *cap = devices[i].cap_uw;
  return 0;
}

uint32_t rsmi_dev_name_get(uint32_t i, char* name, size_t len) {
  CHECK(i);
  if (strlen(devices[i].name) + 1 > len)
    return 3; /* RSMI_STATUS_INSUFFICIENT_SIZE-like */
  strcpy(name, devices[i].name);
  return 0;
}

uint32_t rsmi_dev_memory_total_get(uint32_t i, int type, uint64_t* total) {
  CHECK(i);
  (void)type;
  *total = devices[i].vram;
  return 0;
}

uint32_t rsmi_dev_unique_id_get(uint32_t i, uint64_t* id) {
  CHECK(i);
  *id = devices[i].id;
  return 0;
}

int cgn_fake_rsmi_inits(void) {
  return inits;
}
