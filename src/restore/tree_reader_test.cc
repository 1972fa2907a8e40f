#include "restore/tree_reader.h"
