#include "index/dynamic_index.h"
