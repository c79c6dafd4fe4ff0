/* counter_nonfinite.c - NaN and infinite counter values are left out of
 * last/min/max/avg (which they would poison for the rest of the run) and
 * counted apart, in the table and the JSON summary, which stays valid. */
#include <prof.h>

#include <math.h>

#include "check.h"

int main(void)
{
    prof_counter_stats st;
    char *text, *json;

    CHECK_EQ(prof_enable(1), 0);
    prof_counter("loss", 1.0);
    prof_counter("loss", NAN);
    prof_counter("loss", INFINITY);
    prof_counter("loss", -INFINITY);
    prof_counter("loss", 3.0);
    CHECK_EQ(prof_counter_stats_get("loss", &st), 0);
    CHECK_EQ(st.count, 2);
    CHECK_EQ(st.min, 1.0);
    CHECK_EQ(st.max, 3.0);
    CHECK_EQ(st.avg, 2.0);
    CHECK_EQ(st.last, 3.0);
    text = test_summary(PROF_FORMAT_TEXT);
    CHECK_STR_CONTAINS(text, "(+3 NaN/inf left out)");
    json = test_summary(PROF_FORMAT_JSON);
    CHECK_STR_CONTAINS(json, "\"nonfinite\":3");
    CHECK(strstr(json, "nan") == NULL && strstr(json, "inf") == NULL);
    free(text);
    free(json);
    return 0;
}
