#include "index/chunker.h"
